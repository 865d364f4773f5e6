#!/usr/bin/env bash
# The main job: one sandbox attempt end to end on a real Docker engine.
# Sets up Docker if needed (docker.io, busybox-static, git, e2fsprogs:
# scripts/ensure-docker.sh), builds forged (static), creates a sample
# repository, its busybox base image and a dispatch (nothing from the
# internet), runs the attempt, and shows the result commit on the managed
# branch and that no labelled Docker resource remains. It builds only what
# the example uses: no toolchain or service image (scripts/images.sh and
# scripts/service-images.sh build those for the tests, cached).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

# The engine's set-up (apt, dockerd) waits on the network and the disk, the
# build on the CPU: on a fresh machine they overlap.
bash scripts/ensure-docker.sh &
docker_setup=$!

mkdir -p bin
CGO_ENABLED=0 go build -trimpath -buildvcs=false -o bin/forged ./cmd/forged
CGO_ENABLED=0 go build -trimpath -buildvcs=false -o bin/forged-worker ./cmd/forged-worker

if ! wait "$docker_setup"; then
  echo "example: no Docker engine (scripts/ensure-docker.sh failed)" >&2
  exit 1
fi

work="${FORGED_EXAMPLE_DIR:-$(mktemp -d /tmp/forged-example.XXXXXX)}"
bin/forged example --dir "$work" --state-root "$work/state"
echo
status=0
# The example declares no service; a service catalogue that an earlier
# scripts/service-images.sh (or scripts/test.sh) wrote is still passed on.
catalogue=()
[ -f bin/services.tsv ] && catalogue=(--service-catalogue bin/services.tsv)
# This machine's engine runs rootful and may have only two cores: accept
# the rootful engine explicitly and keep no core back for the host.
bin/forged run --host-reserved-cores 0 "${catalogue[@]}" --state-root "$work/state" "$work/dispatch.json" || status=$?

echo
echo "== managed branch forge/example-task in $work/repo"
git -C "$work/repo" log --format='%h %an: %s' -n 2 forge/example-task || true
git -C "$work/repo" show --stat --format= forge/example-task || true
echo "hello.txt: $(git -C "$work/repo" show forge/example-task:hello.txt 2>/dev/null || echo '(missing)')"

echo
leftover=$( { docker ps -aq --filter label=dev.forge.managed=true; docker network ls -q --filter label=dev.forge.managed=true; docker volume ls -q --filter label=dev.forge.managed=true; } | wc -l)
echo "== labelled Docker resources remaining: $leftover"
[ "$leftover" -eq 0 ] || status=1
exit "$status"
