package redeem

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
)

// canary stands for a redeemed secret in the refusal tests.
const canary = "ghs_CANARY0123456789secret"

func TestParseResponseDecodesACredential(t *testing.T) {
	cred, err := ParseResponse([]byte(`{"username":"x-access-token","secret":"` + canary + `",
		"expiresAt":"2030-01-02T03:04:05Z","remoteUrl":"https://github.com/o/r.git"}` + "\n"))
	require.NoError(t, err)
	assert.Equal(t, "x-access-token", cred.Username)
	assert.Equal(t, canary, cred.Secret)
	assert.Equal(t, "https://github.com/o/r.git", cred.RemoteURL)
	assert.True(t, cred.ExpiresAt.Equal(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)))
}

func TestParseResponseRefusesWithoutQuotingTheAnswer(t *testing.T) {
	valid := `"username":"u","secret":"s","expiresAt":"2030-01-01T00:00:00Z","remoteUrl":"https://github.com/o/r.git"`
	for name, answer := range map[string]string{
		"empty":                             "",
		"garbage":                           "token=" + canary,
		"secret as a bare string":           `"` + canary + `"`,
		"unknown field named by the secret": `{` + valid + `,"` + canary + `":1}`,
		"trailing data":                     `{` + valid + `} ` + canary,
		"truncated":                         `{"username":"u","secret":"` + canary,
		"missing username":                  `{"secret":"` + canary + `","expiresAt":"2030-01-01T00:00:00Z","remoteUrl":"https://github.com/o/r.git"}`,
		"missing secret":                    `{"username":"u","expiresAt":"2030-01-01T00:00:00Z","remoteUrl":"https://github.com/o/r.git"}`,
		"missing expiry":                    `{"username":"u","secret":"` + canary + `","remoteUrl":"https://github.com/o/r.git"}`,
		"missing remote":                    `{"username":"u","secret":"` + canary + `","expiresAt":"2030-01-01T00:00:00Z"}`,
		"secret not a string":               `{"username":"u","secret":["` + canary + `"],"expiresAt":"2030-01-01T00:00:00Z","remoteUrl":"https://github.com/o/r.git"}`,
		"expiry not RFC 3339":               `{"username":"u","secret":"s","expiresAt":"` + canary + `","remoteUrl":"https://github.com/o/r.git"}`,
		"an array":                          `[{` + valid + `}]`,
		"null":                              `null`,
		"oversized":                         `{` + valid + `,"pad":"` + strings.Repeat(canary, MaxResponseBytes/len(canary)+1) + `"}`,
		"invalid character":                 "{\"username\":\"u\x00" + canary + "\"}",
		"duplicate secret":                  `{` + valid + `,"secret":"` + canary + `"}`,
		"field in another case":             `{"username":"u","Secret":"` + canary + `","expiresAt":"2030-01-01T00:00:00Z","remoteUrl":"https://github.com/o/r.git"}`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ParseResponse([]byte(answer))
			require.Error(t, err)
			assert.True(t, failure.Is(err, failure.SandboxOutputPublishForbid), "%v", err)
			assert.NotContains(t, err.Error(), canary)
			assert.NotContains(t, err.Error(), "CANARY")
			assert.True(t, knownReason(err.Error()), "unexpected reason %q", err.Error())
		})
	}
}

// reasonDigits replaces numbers (offsets, bounds) in a refusal.
var reasonDigits = regexp.MustCompile(`[0-9]+`)

// knownReasons are every message ParseResponse may give, numbers
// replaced by N: a refusal outside this set could be quoting its input.
var knownReasons = map[string]bool{}

func init() {
	prefix := string(failure.SandboxOutputPublishForbid) + ": publication grant redemption: malformed answer: "
	for _, r := range []string{
		"longer than N bytes", "username is missing", "secret is missing", "expiresAt is missing",
		"remoteUrl is missing", "expiresAt is not an RFC N time", "trailing data after the JSON object",
		"not JSON (syntax error at byte N)", "username is not a string", "secret is not a string",
		"expiresAt is not a string", "remoteUrl is not a string", "not a JSON object of string fields",
		"empty", "truncated JSON", "not a JSON object of exactly username, secret, expiresAt and remoteUrl, each once",
	} {
		knownReasons[prefix+r] = true
	}
}

func knownReason(msg string) bool { return knownReasons[reasonDigits.ReplaceAllString(msg, "N")] }

// FuzzParseResponse checks that the parser never panics, that every
// refusal is coded and is one of the fixed reasons (so it quotes nothing
// of its input), and that an accepted answer is exactly one strict
// Response whose fields the credential carries.
func FuzzParseResponse(f *testing.F) {
	for _, seed := range []string{
		`{"username":"u","secret":"s","expiresAt":"2030-01-01T00:00:00Z","remoteUrl":"https://github.com/o/r.git"}`,
		`{"username":"u","secret":"s","expiresAt":"2030-01-01T00:00:00+02:00","remoteUrl":""}`,
		`{"username":1}`, `{"x":"y"}`, `{} {}`, `[`, `"`, `nul`, "\xff", `{"secret":"\u0000"}`,
		`{"username":"u","username":"v","secret":"s","expiresAt":"2030-01-01T00:00:00Z","remoteUrl":"r"}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cred, err := ParseResponse(data)
		if err != nil {
			if !failure.Is(err, failure.SandboxOutputPublishForbid) {
				t.Fatalf("uncoded refusal: %v", err)
			}
			if !knownReason(err.Error()) {
				t.Fatalf("refusal outside the fixed reasons: %q", err.Error())
			}
			return
		}
		if len(data) > MaxResponseBytes {
			t.Fatalf("accepted %d bytes", len(data))
		}
		var r Response
		if err := strictjson.Decode(data, &r); err != nil {
			t.Fatalf("accepted an answer strictjson refuses: %v", err)
		}
		if r.Username == nil || r.Secret == nil || r.ExpiresAt == nil || r.RemoteURL == nil {
			t.Fatalf("accepted an answer with a missing field")
		}
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(data, &fields); err != nil || len(fields) != 4 {
			t.Fatalf("accepted an answer without exactly four fields: %v", err)
		}
		for name := range fields {
			if _, ok := responseFields[name]; !ok {
				t.Fatalf("accepted a field spelled %q", name)
			}
		}
		if cred.Username != *r.Username || cred.Secret != *r.Secret || cred.RemoteURL != *r.RemoteURL {
			t.Fatalf("credential does not carry the answer's fields")
		}
		if expires, err := time.Parse(time.RFC3339, *r.ExpiresAt); err != nil || !expires.Equal(cred.ExpiresAt) {
			t.Fatalf("expiry %q became %v", *r.ExpiresAt, cred.ExpiresAt)
		}
	})
}

func TestRequestWireNames(t *testing.T) {
	raw, err := json.Marshal(Request{DispatchAttemptID: "a", LeaseID: "l", FencingToken: "f", RunnerInstanceID: "r", GrantID: "g", Branch: "b", ResultCommitSHA: "c"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"dispatchAttemptId":"a","leaseId":"l","fencingToken":"f","runnerInstanceId":"r","grantId":"g","branch":"b","resultCommitSha":"c"}`, string(raw))
}
