package ledger

import (
	"github.com/forgedev/forged/internal/images/buildlog"
	"github.com/forgedev/forged/messages"
)

// RedactReport returns r with every action's message redacted like a
// build log (buildlog.Redactor: environment-style secrets, token shapes,
// URLs with credentials). The messages carry engine errors, which may
// quote anything the engine was given. The actions are copied; r is not
// changed.
func RedactReport(r messages.CleanupReport) messages.CleanupReport {
	var redactor buildlog.Redactor
	actions := make([]messages.CleanupAction, len(r.Actions))
	for i, a := range r.Actions {
		a.Message = redactor.Redact(a.Message)
		actions[i] = a
	}
	r.Actions = actions
	return r
}

// RedactedError renders err redacted like a build log, and keeps err in
// the chain for errors.Is and errors.As.
func RedactedError(err error) error {
	if err == nil {
		return nil
	}
	return redactedError{err}
}

type redactedError struct{ err error }

func (e redactedError) Error() string {
	var redactor buildlog.Redactor
	return redactor.Redact(e.err.Error())
}

func (e redactedError) Unwrap() error { return e.err }
