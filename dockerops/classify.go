package dockerops

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/forgedev/forged/failure"
)

var (
	oomPattern     = regexp.MustCompile(`(?i)(oomkilled|out of memory|memory cgroup out of memory|cannot allocate memory)`)
	pidPattern     = regexp.MustCompile(`(?i)(resource temporarily unavailable|cannot fork|fork:\s*(retry|resource)|pthread_create[^.]*resource|process limit|pids? limit)`)
	storagePattern = regexp.MustCompile(`(?i)(no space left on device|disk quota exceeded|\benospc\b|workspace quota|storage limit)`)
	fdPattern      = regexp.MustCompile(`(?i)(too many open files|\bemfile\b|\benfile\b)`)
	blankRuns      = regexp.MustCompile(`[\r\n\t]+`)
)

// resourceFailures maps trusted diagnostics to machine codes, first match
// wins.
var resourceFailures = []struct {
	pattern *regexp.Regexp
	code    failure.Code
	message string
}{
	{oomPattern, failure.SandboxOOMKilled, "the sandbox ran out of its memory allowance"},
	{pidPattern, failure.SandboxPIDExhausted, "the sandbox hit its process (PID) limit"},
	{storagePattern, failure.SandboxStorageExhausted, "the sandbox ran out of workspace storage"},
	{fdPattern, failure.SandboxFDExhausted, "the sandbox hit its open-file limit"},
}

// ClassifyResourceFailure maps a trusted engine diagnostic (the container
// state's Error, never the worker's own output) to a resource-exhaustion
// code and message. ok is false when the diagnostic names no exhausted
// resource.
func ClassifyResourceFailure(diagnostic string) (code failure.Code, message string, ok bool) {
	d := clip(strings.TrimSpace(blankRuns.ReplaceAllString(diagnostic, " ")), 2000)
	if d == "" {
		return "", "", false
	}
	for _, f := range resourceFailures {
		if f.pattern.MatchString(d) {
			return f.code, f.message, true
		}
	}
	return "", "", false
}

// WorkerFailureMessage describes a worker that exited without producing
// its output manifest, with a bounded one-line diagnostic from the engine's
// container error and the worker's stderr. It carries no code prefix; the
// caller attaches failure.SandboxWorkerFailed.
func WorkerFailureMessage(exitCode int, stderr, containerError string) string {
	var parts []string
	for _, s := range []string{containerError, stderr} {
		if strings.TrimSpace(s) != "" {
			parts = append(parts, s)
		}
	}
	diagnostic := clip(strings.TrimSpace(blankRuns.ReplaceAllString(strings.Join(parts, " "), " ")), 1000)
	msg := fmt.Sprintf("worker exited with code %d without writing its output manifest", exitCode)
	if diagnostic == "" {
		return msg + "; no diagnostic was captured"
	}
	return msg + "; diagnostic: " + strings.ToValidUTF8(diagnostic, "")
}
