// Package failure defines forged's typed errors and the registry of their
// codes: every failure that reaches an operator or the server carries a
// stable machine code (Code) and a human-readable message. Codes are part
// of forged's external contract; the message is not.
//
// Every code is defined once, in codes.go, with its meaning, whether it is
// retryable and its HTTP status (Lookup, Registered, HTTPStatus). The code
// table, docs/failure-codes.md, is generated from the registry
// (`go generate ./failure/`), and a test keeps it current.
//
// An Error renders "code: message: cause" and unwraps to its cause, so
// errors.Is and errors.As see through it: a call site never repeats the
// cause in its message.
package failure

import (
	"errors"
	"fmt"
)

// Code is a stable, machine-readable failure code such as
// "sandbox_worker_failed".
type Code string

// Error is a failure with a stable code. It wraps an optional cause.
type Error struct {
	Code    Code
	Message string
	Err     error
	// Withheld keeps Err out of the rendering (it may carry a secret, such
	// as a credential's remote URL); it stays in the chain for errors.Is/As.
	Withheld bool
}

// Error renders "code: message: cause", leaving out an empty message, a
// missing cause or a withheld one.
func (e *Error) Error() string {
	s := string(e.Code)
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Err != nil && !e.Withheld {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns a coded error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a coded error with a formatted message and a cause. The
// message says what was being done; the cause is rendered after it.
func Wrap(code Code, err error, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// CodeOf returns the code of the outermost coded error in err's chain, or ""
// when err carries no code.
func CodeOf(err error) Code {
	var coded *Error
	if errors.As(err, &coded) {
		return coded.Code
	}
	return ""
}

// Is reports whether err carries the given code.
func Is(err error, code Code) bool { return CodeOf(err) == code }

// WrapWithheld is Wrap for a cause that must not be shown (it may carry a
// secret): the cause stays in the chain but is not rendered.
func WrapWithheld(code Code, err error, format string, args ...any) *Error {
	e := Wrap(code, err, format, args...)
	e.Withheld = true
	return e
}
