#!/usr/bin/env bash
# The benchmark suite (issue 17): forged against the seed's docker-CLI
# sequence and the engine's floor, measured side by side in one run. Uses
# the set-up of the README's two commands (Docker, busybox-static, git, a
# static bin/forged), then runs cmd/forged-bench, which writes
# BENCHMARKS.md and BENCHMARKS.json. Extra arguments go to forged-bench
# (e.g. --smoke for a short run, --runs 10).
#
# FORGED_BENCH_SCALE sizes B7 (repository scale): FILESxCOMMITS entries
# separated by commas, e.g. FORGED_BENCH_SCALE=1kx1k,30kx1k; empty skips
# B7; unset means the full matrix (1k to 300k files, 1k to 50k commits).
# The synthetic repositories are generated once and kept in
# FORGED_BENCH_CACHE (default ~/.cache/forged-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

bash scripts/ensure-docker.sh

mkdir -p bin
CGO_ENABLED=0 go build -trimpath -o bin/forged ./cmd/forged
# B8: the same source stamped with another version, as a release upgrade is.
CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=bench-upgrade" -o bin/forged-upgraded ./cmd/forged
CGO_ENABLED=0 go build -trimpath -buildvcs=false -o bin/forged-worker ./cmd/forged-worker
go build -o bin/forged-bench ./cmd/forged-bench

notes=()
[ -f docs/benchmarks-notes.md ] && notes=(--notes docs/benchmarks-notes.md)
scale=()
[ -n "${FORGED_BENCH_SCALE+set}" ] && scale=(--scale "$FORGED_BENCH_SCALE")
[ -n "${FORGED_BENCH_CACHE:-}" ] && scale+=(--scale-cache "$FORGED_BENCH_CACHE")
exec bin/forged-bench --forged bin/forged --upgraded-forged bin/forged-upgraded "${notes[@]}" "${scale[@]}" "$@"
