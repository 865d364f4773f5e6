package redeem

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/messages"
)

// MaxResponseBytes bounds a redeemer's answer (helper stdout or endpoint
// body). A credential is four short fields; the secret itself is at most
// gitops.MaxCredentialSecretBytes.
const MaxResponseBytes = 64 << 10

// Request is the redemption request as the helper and the endpoint receive
// it: the grant, scoped to the attempt, its lease and fence, and the exact
// commit to publish. It holds no secret.
type Request struct {
	DispatchAttemptID string `json:"dispatchAttemptId"`
	LeaseID           string `json:"leaseId"`
	FencingToken      string `json:"fencingToken"`
	RunnerInstanceID  string `json:"runnerInstanceId"`
	GrantID           string `json:"grantId"`
	Branch            string `json:"branch"`
	ResultCommitSHA   string `json:"resultCommitSha"`
}

// NewRequest is the wire form of the attempt's publication request; the
// lease id is the dispatch's execution lease.
func NewRequest(req messages.PublicationRequest) Request {
	return Request{
		DispatchAttemptID: req.DispatchAttemptID,
		LeaseID:           req.ExecutionLeaseID,
		FencingToken:      req.FencingToken,
		RunnerInstanceID:  req.RunnerInstanceID,
		GrantID:           req.GrantID,
		Branch:            req.Branch,
		ResultCommitSHA:   req.ResultCommitSHA,
	}
}

// Response is the credential a helper prints or an endpoint answers. All
// four fields are required; expiresAt is RFC 3339.
type Response struct {
	Username  *string `json:"username"`
	Secret    *string `json:"secret"`
	ExpiresAt *string `json:"expiresAt"`
	RemoteURL *string `json:"remoteUrl"`
}

// ParseResponse strictly decodes an answer: exactly one JSON object with
// the four string fields of Response and nothing else (no unknown field,
// no field twice, names spelled exactly, no trailing data), at most
// MaxResponseBytes, expiresAt in RFC 3339. Any
// violation is failure.SandboxOutputPublishForbid whose message names the
// rule, the field or the byte offset, and never a value from data: a
// garbled answer may well hold the secret. ParseResponse does not judge
// the credential itself; see gitops.ValidateCredential.
func ParseResponse(data []byte) (gitops.Credential, error) {
	refuse := func(format string, args ...any) (gitops.Credential, error) {
		return gitops.Credential{}, failure.New(failure.SandboxOutputPublishForbid,
			"publication grant redemption: malformed answer: "+format, args...)
	}
	if len(data) > MaxResponseBytes {
		return refuse("longer than %d bytes", MaxResponseBytes)
	}
	var r Response
	if err := strictjson.Decode(data, &r); err != nil {
		return refuse("%s", describeDecodeError(err))
	}
	if !exactFieldNames(data) {
		return refuse("%s", reasonFields)
	}
	switch {
	case r.Username == nil:
		return refuse("username is missing")
	case r.Secret == nil:
		return refuse("secret is missing")
	case r.ExpiresAt == nil:
		return refuse("expiresAt is missing")
	case r.RemoteURL == nil:
		return refuse("remoteUrl is missing")
	}
	expires, err := time.Parse(time.RFC3339, *r.ExpiresAt)
	if err != nil {
		return refuse("expiresAt is not an RFC 3339 time")
	}
	return gitops.Credential{RemoteURL: *r.RemoteURL, Username: *r.Username, Secret: *r.Secret, ExpiresAt: expires}, nil
}

// describeDecodeError says what is wrong with a decoding error without
// quoting the input: encoding/json quotes unknown field names and
// offending characters, which may be part of a secret. Type errors name
// the field by the Response's own JSON names only.
func describeDecodeError(err error) string {
	var syntax *json.SyntaxError
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.Is(err, strictjson.ErrTrailingData):
		return "trailing data after the JSON object"
	case errors.As(err, &syntax):
		return "not JSON (syntax error at byte " + strconv.FormatInt(syntax.Offset, 10) + ")"
	case errors.As(err, &typeErr):
		if name, ok := responseFields[typeErr.Field]; ok {
			return name + " is not a string"
		}
		return "not a JSON object of string fields"
	case errors.Is(err, io.EOF):
		return "empty"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated JSON"
	default:
		// Unknown fields ("json: unknown field \"…\"") and anything else.
		return reasonFields
	}
}

// reasonFields refuses an object with other fields than the four.
const reasonFields = "not a JSON object of exactly username, secret, expiresAt and remoteUrl, each once"

// exactFieldNames reports whether data, an object that decoded into a
// Response, names each field at most once and exactly as Response spells
// it: encoding/json would take a duplicate's last value and match names
// without regard to case, so that two readers could disagree on the
// answer.
func exactFieldNames(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return tok == nil && err == nil // null: the missing fields are refused next
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		name, _ := tok.(string)
		if _, known := responseFields[name]; !known || seen[name] {
			return false
		}
		seen[name] = true
		// The value is a string or null: it decoded into a *string.
		if _, err := dec.Token(); err != nil {
			return false
		}
	}
	return true
}

// responseFields are the field names a type error may name.
var responseFields = map[string]string{"username": "username", "secret": "secret", "expiresAt": "expiresAt", "remoteUrl": "remoteUrl"}
