#!/usr/bin/env bash
# The whole test suite: sets up Docker if needed (and chromium, for the
# console's browser test), builds the offline images of
# scripts/services.catalogue and scripts/images.catalogue (cached: only the
# first run on a machine builds them, installing mmdebstrap then), checks
# formatting and vet, then runs every test with the race detector. The
# real-engine tests run whenever an engine answers; with CI=true they fail
# instead of skipping when none does.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

# Headless chromium loads the live console in httpapi's browser test;
# promtool (package prometheus) checks contrib/'s alert rules and dashboard.
bash scripts/ensure-docker.sh chromium prometheus jq openssl
# The fleet's tests start their own etcd (internal/testkit/etcdtest).
bash scripts/ensure-etcd.sh
# The unit's user and loop devices it may open (cmd/forged's
# TestUnitDeploymentBoundsAWriter runs forged as that user).
bash scripts/ensure-forged-user.sh
# The syft CLI, the image policy's SBOM generator in the runner's
# end-to-end test, built from its own module (scripts/tools/syft) and
# cached: only the first run on a machine builds it, in the background
# while the images below are built.
mkdir -p bin
bash scripts/ensure-syft.sh > bin/.syft-path &
syft_build=$!
# gVisor's runsc, registered with the engine as the runtime "runsc" (by
# SIGHUP, no engine restart), for the gVisor isolation tests.
bash scripts/ensure-runsc.sh
# The service images (postgres, redis, browser, the egress proxy) and their
# catalogue, bin/services.tsv:
# cached, only the first run on a machine builds them.
bash scripts/service-images.sh
bash scripts/images.sh
# The Debian root filesystem the package test installs the .deb into.
bash scripts/package-root.sh
wait "$syft_build"
FORGED_SYFT=$(cat bin/.syft-path)
export FORGED_SYFT

unformatted=$(gofmt -l $(git ls-files '*.go') 2>/dev/null || true)
if [ -n "$unformatted" ]; then
  echo "gofmt would change:" >&2
  echo "$unformatted" >&2
  exit 1
fi
go vet ./...
# cmd/forged's fleet build (forged-fleet) compiles fleet_linked.go.
go vet -tags fleet ./cmd/forged/
# Product code never runs the docker CLI. The one exemption is the
# benchmark's seed baseline (internal/bench/seedcli.go), which measures the
# seed's fork-per-step sequence against forged.
if grep -rn --include='*.go' -E 'exec\.Command(Context)?\(([^,()]*, *)?"docker"' --exclude='*_test.go' . |
  grep -v '^\./internal/bench/seedcli\.go:' ; then
  echo "product code must not run the docker CLI" >&2
  exit 1
fi
# The longest packages first: go test starts packages in the order given,
# two at a time on two cores, and the runner's real-engine suite alone
# takes about 20 minutes; started last, it ran past the 30-minute budget.
go test -race -count=1 -timeout 45m ./internal/daemon/runner/ ./cmd/forged/ ./internal/sandbox/toolchains/ \
  ./dockerops/ ./internal/fleet/ ./internal/bench/ ./... "$@"
