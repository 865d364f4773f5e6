// Package archtest holds the tests that keep the module's house in order:
// the layers of docs/architecture.md (no import runs from a lower layer to
// a higher one, and no product package imports a test kit) and the
// top-level directories the design card allows. It has no code of its own;
// its tests read the tree through `go list` and `git ls-files`.
package archtest
