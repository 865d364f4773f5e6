package failure_test

import (
	"errors"
	"io/fs"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// readmeTable returns the rows of README.md's "Failure codes" table as
// registry specs: | `code` | yes/no | status | meaning |.
func readmeTable(t *testing.T) []failure.Spec {
	t.Helper()
	raw, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	_, section, ok := strings.Cut(string(raw), "\n## Failure codes\n")
	require.True(t, ok, "README.md has a Failure codes section")
	section, _, _ = strings.Cut(section, "\n## ")
	var rows []failure.Spec
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(strings.Trim(line, "|"), " | ")
		require.Len(t, cells, 4, "a row has code, retryable, HTTP and meaning: %s", line)
		status, err := strconv.Atoi(cells[2])
		require.NoError(t, err, line)
		require.Contains(t, []string{"yes", "no"}, cells[1], line)
		rows = append(rows, failure.Spec{
			Code:       failure.Code(strings.Trim(strings.TrimSpace(cells[0]), "`")),
			Retryable:  cells[1] == "yes",
			HTTPStatus: status,
			Meaning:    strings.TrimSpace(cells[3]),
		})
	}
	require.NotEmpty(t, rows)
	return rows
}

// TestReadmeTableMatchesRegistry holds README's code table and the registry
// to each other, row for row: every documented code is registered with the
// same retryability, status and meaning, and every registered code is
// documented.
func TestReadmeTableMatchesRegistry(t *testing.T) {
	documented := map[failure.Code]bool{}
	for _, row := range readmeTable(t) {
		assert.False(t, documented[row.Code], "%s is documented twice", row.Code)
		documented[row.Code] = true
		spec, ok := failure.Lookup(row.Code)
		if assert.True(t, ok, "README documents %s, which is not registered", row.Code) {
			assert.Equal(t, spec, row, "README's row for %s differs from failure/codes.go", row.Code)
		}
	}
	for _, s := range failure.Registered() {
		assert.True(t, documented[s.Code], "%s is registered but missing from README's code table", s.Code)
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
