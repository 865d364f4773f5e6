#!/usr/bin/env bash
# The long soak loops, in full. The suite (scripts/test.sh) runs each of
# these tests once, as their short form; this runs them many times over,
# with the race detector:
#
#   - the chaos tests of cmd/forged (kill -9 of a live `forged daemon` at
#     each phase of an attempt, while services, a per-attempt cache or the
#     egress proxy run; the restarted forged must leave nothing behind),
#     FORGED_SOAK_COUNT times (default 10); then the chaos loop in full
#     (20 restarts over a burst of 10; the suite runs 5 over 4);
#   - the fast-failure tasks of internal/daemon/runner (descriptors, a full
#     workspace, an OOM), each FORGED_SOAK_COUNT times, every run classified;
#   - the actor test harness (./actortest/), five times as often, since its
#     probes must be stable at -count=50.
#
# Usage: scripts/soak.sh [go test flags...]   (e.g. -v, -failfast)
#
# Sets up Docker and the service images as scripts/test.sh does (cached).
# With CI=true the real-engine tests fail instead of skipping when no
# engine answers.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PATH:/usr/local/go/bin"

count="${FORGED_SOAK_COUNT:-10}"

bash scripts/ensure-docker.sh
# The chaos tests' services and egress proxy come from the service
# catalogue, bin/services.tsv (cached: only the first run builds it).
bash scripts/service-images.sh

go test -race -count="$count" -timeout 0 -run '^TestChaos' ./cmd/forged/ "$@"
# The chaos loop in full (issue 27): 20 random kill -9 restarts of the
# daemon over a burst of 10 attempts; each ends once, nothing leaks.
FORGED_CHAOS_RESTARTS=20 FORGED_CHAOS_BURST=10 go test -race -count=1 -timeout 0 \
  -run '^TestChaosLoopKill9DuringABurst$' ./cmd/forged/ "$@"
# The fast-failure tasks (issue 28, finding 8), each run $count times in one test
# (the suite runs the OOM task 10 times and the others fewer, for its CI budget).
FORGED_FASTFAIL_RUNS="$count" go test -race -count=1 -timeout 0 \
  -run '^(TestDescriptorExhaustionOfAQuickTaskIsClassified|TestFullWorkspaceOfAQuickTaskIsClassified|TestOOMOfATaskKeepsItsOutput)$' \
  ./internal/daemon/runner/ "$@"
go test -race -count="$((count * 5))" -timeout 0 ./actortest/ "$@"
