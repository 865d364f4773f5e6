package failure

import (
	"fmt"
	"net/http"
)

// Retry says whether a new dispatch of the same work may succeed.
type Retry bool

// The two answers of Retry.
const (
	// Retryable: the cause is transient or outside the work (capacity, the
	// engine, a crash); the server may dispatch the work again.
	Retryable Retry = true
	// Permanent: the same dispatch would fail the same way.
	Permanent Retry = false
)

// Spec is one registered code.
type Spec struct {
	Code      Code
	Retryable bool
	// HTTPStatus is the status the daemon answers a refusal with this code.
	HTTPStatus int
	// Meaning is the one-line explanation in the code table,
	// docs/failure-codes.md.
	Meaning string
	// Alias is an earlier name of the code that forged used before it put
	// the seed's name back on the wire; Lookup still answers it, and the
	// code table shows it. Never emitted.
	Alias Code
}

var (
	registry = map[Code]Spec{}
	aliases  = map[Code]Code{}
	order    []Code
)

// define registers a code; it is only called from the var blocks of
// codes.go, during package initialisation. A duplicate is a programming
// error.
func define(name string, retry Retry, status int, meaning string) Code {
	code := Code(name)
	if _, dup := registry[code]; dup {
		panic(fmt.Sprintf("failure: code %q defined twice", name))
	}
	registry[code] = Spec{Code: code, Retryable: bool(retry), HTTPStatus: status, Meaning: meaning}
	order = append(order, code)
	return code
}

// alias registers name as an earlier name of code and returns code, so
// that the Go name of the old code keeps meaning the wire name; it is
// only called from codes.go, during package initialisation.
func alias(code Code, name string) Code {
	old := Code(name)
	spec, ok := registry[code]
	if _, dup := registry[old]; dup || !ok || spec.Alias != "" {
		panic(fmt.Sprintf("failure: bad alias %q of %q", name, code))
	}
	spec.Alias = old
	registry[code] = spec
	aliases[old] = code
	return code
}

// Lookup returns the registered spec of code, or of the code an alias
// names.
func Lookup(code Code) (Spec, bool) {
	if c, ok := aliases[code]; ok {
		code = c
	}
	s, ok := registry[code]
	return s, ok
}

// Registered returns every registered code's spec, in definition order.
func Registered() []Spec {
	out := make([]Spec, 0, len(order))
	for _, c := range order {
		out = append(out, registry[c])
	}
	return out
}

// HTTPStatus is the status for code: its registered one, or 500 for an
// unknown or empty code.
func HTTPStatus(code Code) int {
	if s, ok := registry[code]; ok {
		return s.HTTPStatus
	}
	return http.StatusInternalServerError
}

// IsRetryable reports whether err's code is registered as retryable. An
// uncoded error counts as sandbox_runtime_failed.
func IsRetryable(err error) bool {
	code := CodeOf(err)
	if code == "" {
		code = SandboxRuntimeFailed
	}
	return registry[code].Retryable
}
