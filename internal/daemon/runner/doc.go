// Package runner embeds forged's actor system: it connects to the Docker
// engine, spawns the root supervisor with its attempt factory, and offers a
// small blocking API (Submit, Cancel, Snapshot, Inspect) to the CLI and the
// daemon's HTTP API. Everything it does goes through messages to the root
// supervisor; it holds no attempt state of its own beyond event logs.
//
// # The worker binary
//
// The program that runs inside the sandbox is not forged but forged-worker
// (cmd/forged-worker), a small static binary built reproducibly apart from
// the daemon. New finds it at Config.WorkerBinary (the --worker-binary
// setting: the flag, FORGED_WORKER_BINARY or the configuration key
// workerBinary), and without one at forged-worker beside the running
// executable, where scripts/example.sh and scripts/bench.sh build it
// (bin/forged-worker next to bin/forged). It refuses a binary that is dynamically linked (the
// sandbox image offers no libc) and hashes it once: its sha256 is the
// WorkerDigest of every sandbox image key, so a daemon rebuilt or upgraded
// without touching the worker keeps every cached image.
//
// The worker is baked into the agent overlay image (dockerops.OverlayContext)
// rather than injected at run time; the dockerops package doc says why.
package runner
