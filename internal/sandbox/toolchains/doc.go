// Package toolchains runs real projects' test suites inside forged: for
// each toolchain of scripts/images.catalogue (Go, Node, Python, Rust, C), a
// small sample project of our own under testdata/<name> (a real test
// suite, no dependencies to download) is committed to a fresh repository
// whose .forge/Dockerfile is FROM the toolchain's image, and an attempt
// whose task is the project's own test command (go test ./..., npm test,
// pytest, cargo test --offline, ./configure && make check) runs through a
// whole embedded forged on the real engine.
//
// The images are built offline from Debian's packages by scripts/images.sh,
// never by the tests; the script writes the catalogue this package reads
// (ReadCatalogue). The tests assert that the test command passed, that the
// result commit holds exactly the report the task wrote, and log each
// attempt's peak memory.
package toolchains
