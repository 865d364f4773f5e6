// Package bench measures forged side by side with the seed's docker-CLI
// sequence and with the engine's floor, on the machine it runs on, and
// writes the figures as Markdown (BENCHMARKS.md) and JSON.
//
// Every measurement of one run is made in the same process, one after the
// other, so the ratios compare figures taken under the same load. Each
// timed variant runs N times after one untimed warm-up; a Summary keeps
// the median, the minimum and the maximum.
//
// The variants of B1 (one trivial attempt) and B2 (a burst):
//
//   - forged run: the `forged run` command, timed from fork to exit.
//   - daemon: `forged daemon` serving its HTTP API on a unix socket, timed
//     from the POST of the dispatch to the "finished" line of its event
//     stream.
//   - seed CLI: the seed's sequence of docker CLI forks for one attempt
//     with a cached image (see seedcli.go, the one file of the repository
//     allowed to run the docker CLI; scripts/test.sh names it).
//   - floor: the least work of the same Engine API calls, independent steps
//     in parallel, nothing else (see floor.go), with the seed's network;
//     "floor, no network" is the floor of forged's own calls.
//
// The seed CLI and the floor do only the Docker part of an attempt: the
// host-side git work (bundle of the input, import of the result) and the
// ledger writes are done by forged alone, and their bundle is prepared
// before the clock starts. The comparison therefore favours them.
//
// B3, B4 and B5 take some figures from Go benchmarks of the repository
// (gobench.go lists them), run with `go test -bench`. Everything a run
// creates is removed at Close, and a final sweep by the run's runner ids
// counts and removes whatever a failed measurement left (Env.Leftovers).
package bench
