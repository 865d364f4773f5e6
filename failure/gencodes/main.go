// Command gencodes writes docs/failure-codes.md, the failure-code table,
// from the registry in failure/codes.go. Run it through
// `go generate ./failure/`, or as `go run ./failure/gencodes -o PATH` from
// the module root. failure's tests fail while the committed page differs
// from what it would write.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/failure/internal/codedoc"
)

func main() {
	out := flag.String("o", codedoc.Path, "the page to write")
	flag.Parse()
	if err := os.WriteFile(*out, codedoc.Render(failure.Registered()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "gencodes:", err)
		os.Exit(1)
	}
}
