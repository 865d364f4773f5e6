// Package codedoc renders the failure-code registry as the Markdown page
// docs/failure-codes.md. The page is generated (failure/gencodes, run by
// `go generate ./failure/`), and failure's tests render it again in memory
// and fail when the committed page differs.
package codedoc

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/forgedev/forged/failure"
)

// Path is the page's path relative to the module root.
const Path = "docs/failure-codes.md"

// Regenerate is the command that writes the page, for messages.
const Regenerate = "go generate ./failure/"

// Render returns the page for specs, in their order.
func Render(specs []failure.Spec) []byte {
	var b bytes.Buffer
	b.WriteString("<!-- Generated from failure/codes.go by " + Regenerate + "; DO NOT EDIT. -->\n\n")
	b.WriteString("# Failure codes\n\n")
	b.WriteString("Every code is registered once, in `failure/codes.go`, with its meaning, whether a new dispatch of\n")
	b.WriteString("the same work may succeed (retryable), and the HTTP status the daemon refuses with. This page is\n")
	b.WriteString("generated from that registry (`" + Regenerate + "`), and a test fails when it is not current.\n")
	b.WriteString("An error renders `code: message: cause`.\n\n")
	b.WriteString("| code | retryable | HTTP | meaning |\n")
	b.WriteString("| --- | --- | --- | --- |\n")
	for _, s := range specs {
		retry := "no"
		if s.Retryable {
			retry = "yes"
		}
		meaning := s.Meaning
		if s.Alias != "" {
			meaning += fmt.Sprintf(" (forged's earlier name: `%s`)", s.Alias)
		}
		fmt.Fprintf(&b, "| `%s` | %s | %d | %s |\n", s.Code, retry, s.HTTPStatus, cell(meaning))
	}
	return b.Bytes()
}

// cell keeps a meaning on one table row: a pipe would end the cell and a
// line break the row.
func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.Join(strings.Fields(s), " ")
}
