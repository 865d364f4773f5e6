#!/usr/bin/env bash
# Builds the syft CLI (the image policy's SBOM generator in the tests, and
# the one docs/image-policy.md suggests) from the Go module pinned in
# scripts/tools/syft/go.mod, a module of its own so that syft's large
# dependency tree never enters forged's. The binary is cached on the
# machine, keyed by that go.mod and go.sum: only the first run builds (a
# few minutes on two cores), later runs print the cached path at once.
# bin/syft (ignored by git) links to it.
#
# Usage: scripts/ensure-syft.sh     prints the binary's absolute path
# Cache: $FORGED_TOOLS_CACHE, default ${XDG_CACHE_HOME:-~/.cache}/forged/tools
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

log() { printf 'ensure-syft: %s\n' "$*" >&2; }

module=scripts/tools/syft
version=$(awk '$1 == "github.com/anchore/syft" { print $2 }' "$module/go.mod")
[ -n "$version" ] || { log "no github.com/anchore/syft requirement in $module/go.mod"; exit 1; }
sum=$(cat "$module/go.mod" "$module/go.sum" | sha256sum | cut -c1-16)
cache=${FORGED_TOOLS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/forged/tools}
out="$cache/syft-$version-$sum/syft"

if [ ! -x "$out" ]; then
  log "building syft $version (cached in $(dirname "$out"))"
  mkdir -p "$(dirname "$out")"
  start=$(date +%s)
  (cd "$module" && GOFLAGS=-buildvcs=false go build -o "$out.tmp" \
    -ldflags "-s -w" github.com/anchore/syft/cmd/syft)
  mv "$out.tmp" "$out"
  log "built in $(( $(date +%s) - start ))s"
fi
mkdir -p bin
ln -sfn "$out" bin/syft
echo "$out"
