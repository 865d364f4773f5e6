package failure_test

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/failure/internal/codedoc"
)

// aliasSuffix is how the table shows a code's earlier name.
var aliasSuffix = regexp.MustCompile("^(.*) \\(forged's earlier name: `([a-z_]+)`\\)$")

// tableRows returns the rows of a code table as registry specs:
// | `code` | yes/no | status | meaning |.
func tableRows(t *testing.T, page string) []failure.Spec {
	t.Helper()
	var rows []failure.Spec
	for _, line := range strings.Split(page, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		require.Len(t, cells, 4, "a row has code, retryable, HTTP and meaning: %s", line)
		status, err := strconv.Atoi(cells[2])
		require.NoError(t, err, line)
		require.Contains(t, []string{"yes", "no"}, cells[1], line)
		meaning, alias := strings.ReplaceAll(strings.TrimSpace(cells[3]), `\|`, "|"), ""
		if m := aliasSuffix.FindStringSubmatch(meaning); m != nil {
			meaning, alias = m[1], m[2]
		}
		rows = append(rows, failure.Spec{
			Code:       failure.Code(strings.Trim(strings.TrimSpace(cells[0]), "`")),
			Retryable:  cells[1] == "yes",
			HTTPStatus: status,
			Meaning:    meaning,
			Alias:      failure.Code(alias),
		})
	}
	require.NotEmpty(t, rows)
	return rows
}

// TestCodeTableIsCurrent renders the code table from the registry in
// memory and holds docs/failure-codes.md to it, byte for byte.
func TestCodeTableIsCurrent(t *testing.T) {
	want := string(codedoc.Render(failure.Registered()))
	raw, err := os.ReadFile(filepath.Join("..", codedoc.Path))
	require.NoError(t, err, "%s is missing: run `%s`", codedoc.Path, codedoc.Regenerate)
	got := string(raw)
	if got == want {
		return
	}
	gotLines, wantLines := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gotLines) || i < len(wantLines); i++ {
		var g, w string
		if i < len(gotLines) {
			g = gotLines[i]
		}
		if i < len(wantLines) {
			w = wantLines[i]
		}
		if g != w {
			t.Fatalf("%s is not current with failure/codes.go: run `%s`\nfirst difference, line %d:\n  page:     %s\n  registry: %s",
				codedoc.Path, codedoc.Regenerate, i+1, g, w)
		}
	}
}

// TestCodeTableHoldsTheRegistry reads the rendered table back, row for
// row: every registered code is there once, with the same retryability,
// status and meaning, in definition order.
func TestCodeTableHoldsTheRegistry(t *testing.T) {
	rows := tableRows(t, string(codedoc.Render(failure.Registered())))
	assert.Equal(t, failure.Registered(), rows)
	documented := map[failure.Code]bool{}
	for _, row := range rows {
		assert.False(t, documented[row.Code], "%s is documented twice", row.Code)
		documented[row.Code] = true
	}
}

func TestRegistryEntriesAreComplete(t *testing.T) {
	valid := regexp.MustCompile(`^[a-z][a-z0-9_]*[a-z0-9]$`)
	for _, s := range failure.Registered() {
		assert.Regexp(t, valid, string(s.Code))
		assert.NotEmpty(t, s.Meaning, s.Code)
		assert.NotEmpty(t, http.StatusText(s.HTTPStatus), "%s: status %d", s.Code, s.HTTPStatus)
		assert.GreaterOrEqual(t, s.HTTPStatus, 400, s.Code)
	}
	assert.Equal(t, http.StatusInternalServerError, failure.HTTPStatus("no_such_code"))
	assert.Equal(t, http.StatusTooManyRequests, failure.HTTPStatus(failure.CapacityExhausted))
	assert.True(t, failure.IsRetryable(errors.New("uncoded")), "uncoded errors count as sandbox_runtime_failed")
	assert.False(t, failure.IsRetryable(failure.New(failure.DispatchInvalid, "x")))
}

func TestErrorRendersCodeMessageAndCause(t *testing.T) {
	cause := &fs.PathError{Op: "open", Path: "/x", Err: fs.ErrNotExist}
	err := failure.Wrap(failure.SandboxInputFailed, cause, "read %s", "input")
	assert.Equal(t, "sandbox_input_failed: read input: open /x: file does not exist", err.Error())
	assert.Equal(t, "sandbox_input_failed: open /x: file does not exist", failure.Wrap(failure.SandboxInputFailed, cause, "").Error())
	assert.Equal(t, "sandbox_cancelled: stop", failure.New(failure.SandboxCancelled, "stop").Error())

	wrapped := failure.Wrap(failure.SandboxTeardownFailed, err, "outer")
	assert.ErrorIs(t, wrapped, fs.ErrNotExist)
	var pe *fs.PathError
	require.ErrorAs(t, wrapped, &pe)
	assert.Equal(t, "/x", pe.Path)
	assert.Equal(t, failure.SandboxTeardownFailed, failure.CodeOf(wrapped), "the outermost code wins")
	assert.True(t, failure.Is(wrapped, failure.SandboxTeardownFailed))
	assert.Equal(t, failure.Code(""), failure.CodeOf(cause))

	secret := failure.WrapWithheld(failure.SandboxOutputPublishForbid, cause, "refused")
	assert.Equal(t, "sandbox_output_publish_forbidden: refused", secret.Error(), "a withheld cause is not shown")
	assert.ErrorIs(t, secret, fs.ErrNotExist, "but stays in the chain")
}
