package dockerops

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/forgedev/forged/failure"
)

func TestClassifyResourceFailure(t *testing.T) {
	cases := []struct {
		diagnostic string
		code       failure.Code
	}{
		{"OOMKilled", failure.SandboxOOMKilled},
		{"task failed: Out Of Memory", failure.SandboxOOMKilled},
		{"Memory cgroup out of memory: Killed process 42", failure.SandboxOOMKilled},
		{"fork: Cannot allocate memory", failure.SandboxOOMKilled},
		{"sh: can't fork: Resource temporarily unavailable", failure.SandboxPIDExhausted},
		{"bash: fork: retry: Resource temporarily unavailable", failure.SandboxPIDExhausted},
		{"fork: resource exhausted", failure.SandboxPIDExhausted},
		{"runtime: failed to create new OS thread (pthread_create failed: resource limit)", failure.SandboxPIDExhausted},
		{"cannot fork", failure.SandboxPIDExhausted},
		{"process limit reached", failure.SandboxPIDExhausted},
		{"PIDs limit", failure.SandboxPIDExhausted},
		{"pid limit", failure.SandboxPIDExhausted},
		{"write /workspace/x: no space left on device", failure.SandboxStorageExhausted},
		{"Disk quota exceeded", failure.SandboxStorageExhausted},
		{"error: ENOSPC", failure.SandboxStorageExhausted},
		{"workspace quota", failure.SandboxStorageExhausted},
		{"storage limit hit", failure.SandboxStorageExhausted},
		{"open /x: too many open files", failure.SandboxFDExhausted},
		{"EMFILE", failure.SandboxFDExhausted},
		{"error ENFILE here", failure.SandboxFDExhausted},
		// Multi-line diagnostics are flattened before matching.
		{"out of\nmemory", failure.SandboxOOMKilled},
		// First match wins.
		{"cannot allocate memory; too many open files", failure.SandboxOOMKilled},
	}
	for _, tc := range cases {
		code, msg, ok := ClassifyResourceFailure(tc.diagnostic)
		assert.True(t, ok, tc.diagnostic)
		assert.Equal(t, tc.code, code, tc.diagnostic)
		assert.NotEmpty(t, msg)
	}
	for _, none := range []string{"", "   \n\t", "exit status 1", "EMFILES", "xenospc", "permission denied",
		strings.Repeat("x", 2000) + " out of memory"} {
		_, _, ok := ClassifyResourceFailure(none)
		assert.False(t, ok, "%.40q", none)
	}
}

func TestWorkerFailureMessage(t *testing.T) {
	assert.Equal(t, "worker exited with code 2 without writing its output manifest; no diagnostic was captured",
		WorkerFailureMessage(2, " \n", ""))
	assert.Equal(t, "worker exited with code 137 without writing its output manifest; diagnostic: engine said no stderr line one line two",
		WorkerFailureMessage(137, "stderr line one\r\n\tline two\n", "engine said no"))
	long := WorkerFailureMessage(1, strings.Repeat("é", 2000), "")
	diag := long[strings.Index(long, "diagnostic: ")+len("diagnostic: "):]
	assert.LessOrEqual(t, len(diag), 1000)
	assert.True(t, strings.HasSuffix(diag, "é"), "cut on a rune boundary")
}
