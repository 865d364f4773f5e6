// Package runner embeds forged's actor system: it connects to the Docker
// engine, spawns the root supervisor with its attempt factory, and offers a
// small blocking API (Submit, Cancel, Snapshot, Inspect) to the CLI and the
// daemon's HTTP API. Everything it does goes through messages to the root
// supervisor; it holds no attempt state of its own beyond event logs.
package runner
