// Package failure defines forged's typed errors: every failure that reaches
// an operator or the server carries a stable machine code (Code) and a
// human-readable message. Codes are part of forged's external contract; the
// message is not.
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
}

// Error renders "code: message".
func (e *Error) Error() string {
	if e.Message == "" {
		return string(e.Code)
	}
	return string(e.Code) + ": " + e.Message
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns a coded error with a formatted message.
func New(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a coded error with a formatted message and a cause.
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
