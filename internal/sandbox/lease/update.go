// Package lease implements the signed lease updates of a sandbox attempt
// and the monotonic deadline that the worker (and the host) derive from
// them.
//
// An attempt runs under a lease that ends at a wall-clock expiry. The host
// may renew it by pushing an Update into the running sandbox: a small JSON
// document naming the attempt, its fencing token and the new expiry,
// authenticated with HMAC-SHA256 under a random per-attempt control key
// (NewControlKey) that only the host and the worker know. The key travels
// to the worker in its start packet; the task, which shares the worker's
// user and can write the update file, never learns it.
//
// The MAC is computed, keyed with the UTF-8 bytes of the control key
// string, over
//
//	dispatchAttemptId + "\n" + fencingToken + "\n" + expiresAt
//
// where expiresAt is the RFC 3339 text exactly as it appears in the update,
// and is carried base64url-encoded without padding.
//
// A Deadline holds the current expiry of one attempt. It converts the
// wall-clock expiry into a deadline on a monotonic clock at the moment it
// is created or an update is applied, so that setting the system clock
// later neither shortens nor extends the lease. Apply accepts an update
// only for the same attempt and fencing token, with a valid MAC (compared
// in constant time) and an expiry strictly later than the current one.
//
// Every refusal is a *failure.Error carrying one of the codes
// UpdateInvalid, UpdateForbidden or UpdateStale.
package lease

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
)

// UpdateSchema is the SchemaVersion of an Update.
const UpdateSchema = 1

// MaxUpdateBytes bounds an encoded Update. DecodeUpdate refuses anything
// longer.
const MaxUpdateBytes = 4 << 10

// Bounds of the fields of an Update.
const (
	maxIDBytes     = 256
	maxExpiryBytes = 64
	macBytes       = sha256.Size
	controlKeySize = 32
)

// Failure codes of a refused update (registered in package failure).
var (
	// UpdateInvalid: the update is malformed (not a strict JSON document of
	// the right shape, wrong schema, unparsable expiry, malformed MAC).
	UpdateInvalid = failure.LeaseUpdateInvalid
	// UpdateForbidden: the update is well formed but not for this lease
	// (another attempt or fencing token) or its MAC does not verify.
	UpdateForbidden = failure.LeaseUpdateForbid
	// UpdateStale: the update is authentic but does not move the expiry
	// later (a replayed or reordered update).
	UpdateStale = failure.LeaseUpdateStale
)

// Update is a signed lease renewal, the document written to
// /run/forge/lease-update.json inside the sandbox.
type Update struct {
	SchemaVersion     int    `json:"schemaVersion"`
	DispatchAttemptID string `json:"dispatchAttemptId"`
	FencingToken      string `json:"fencingToken"`
	// ExpiresAt is the new expiry in RFC 3339 form, exactly as signed.
	ExpiresAt string `json:"expiresAt"`
	// MAC is the base64url (unpadded) HMAC-SHA256 of the update.
	MAC string `json:"mac"`
}

// NewControlKey returns a fresh control key: 32 random bytes, base64url
// encoded without padding.
func NewControlKey() (string, error) {
	b := make([]byte, controlKeySize)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("lease control key: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Sign returns the update renewing the lease of attemptID under
// fencingToken until expiresAt, authenticated with controlKey. The expiry
// is written in UTC with RFC 3339 (nanosecond precision when needed).
func Sign(attemptID, fencingToken string, expiresAt time.Time, controlKey string) (Update, error) {
	if err := checkID("dispatchAttemptId", attemptID); err != nil {
		return Update{}, err
	}
	if err := checkID("fencingToken", fencingToken); err != nil {
		return Update{}, err
	}
	if controlKey == "" {
		return Update{}, invalid("the control key is empty")
	}
	expiry := expiresAt.UTC().Format(time.RFC3339Nano)
	if parsed, err := parseExpiry(expiry); err != nil || !parsed.Equal(expiresAt) {
		return Update{}, invalid("expiry %v cannot be written in RFC 3339", expiresAt)
	}
	return Update{
		SchemaVersion:     UpdateSchema,
		DispatchAttemptID: attemptID,
		FencingToken:      fencingToken,
		ExpiresAt:         expiry,
		MAC:               base64.RawURLEncoding.EncodeToString(computeMAC(attemptID, fencingToken, expiry, controlKey)),
	}, nil
}

// computeMAC is the HMAC-SHA256 of the update's fields under controlKey.
func computeMAC(attemptID, fencingToken, expiresAt, controlKey string) []byte {
	m := hmac.New(sha256.New, []byte(controlKey))
	_, _ = io.WriteString(m, attemptID+"\n"+fencingToken+"\n"+expiresAt)
	return m.Sum(nil)
}

// updateFields are the members of an encoded Update, all required.
var updateFields = []string{"schemaVersion", "dispatchAttemptId", "fencingToken", "expiresAt", "mac"}

// DecodeUpdate strictly decodes an encoded Update and checks its form (see
// Validate); it cannot check the MAC, which needs the control key. The
// document must be one JSON object of at most MaxUpdateBytes holding
// exactly the five members, each once, with their exact (case-sensitive)
// names; surrounding whitespace is allowed, anything else after it is not.
// Refusals carry UpdateInvalid.
func DecodeUpdate(raw []byte) (Update, error) {
	if len(raw) > MaxUpdateBytes {
		return Update{}, invalid("update exceeds %d bytes", MaxUpdateBytes)
	}
	members, err := objectMembers(raw)
	if err != nil {
		return Update{}, invalid("%v", err)
	}
	var u Update
	targets := map[string]any{
		"schemaVersion":     &u.SchemaVersion,
		"dispatchAttemptId": &u.DispatchAttemptID,
		"fencingToken":      &u.FencingToken,
		"expiresAt":         &u.ExpiresAt,
		"mac":               &u.MAC,
	}
	for _, name := range updateFields {
		value, ok := members[name]
		if !ok {
			return Update{}, invalid("member %q is missing", name)
		}
		if bytes.Equal(value, []byte("null")) {
			return Update{}, invalid("member %q is null", name)
		}
		if err := json.Unmarshal(value, targets[name]); err != nil {
			return Update{}, invalid("member %q: %v", name, err)
		}
	}
	if err := u.Validate(); err != nil {
		return Update{}, err
	}
	return u, nil
}

// objectMembers splits one JSON object into its members with forged's
// strict decoder (one value, no duplicate names, nothing after it), and
// refuses any name that is not exactly one of updateFields: encoding/json
// would match a name to a field without regard to case.
func objectMembers(raw []byte) (map[string]json.RawMessage, error) {
	var members map[string]json.RawMessage
	if err := strictjson.Decode(raw, &members); err != nil {
		return nil, err
	}
	if members == nil {
		return nil, errors.New("not a JSON object")
	}
	names := slices.Sorted(maps.Keys(members))
	for _, name := range names {
		if !slices.Contains(updateFields, name) {
			return nil, fmt.Errorf("unknown member %.64q", name)
		}
	}
	return members, nil
}

// Validate checks the form of the update: schema UpdateSchema, attempt id
// and fencing token of 1-256 printable ASCII characters without spaces, an
// RFC 3339 expiry and a MAC that is the unpadded base64url encoding of 32
// bytes. Refusals carry UpdateInvalid.
func (u Update) Validate() error {
	_, _, err := u.parse()
	return err
}

// parse validates the update and returns its expiry and raw MAC.
func (u Update) parse() (time.Time, []byte, error) {
	if u.SchemaVersion != UpdateSchema {
		return time.Time{}, nil, invalid("schemaVersion %d is not %d", u.SchemaVersion, UpdateSchema)
	}
	if err := checkID("dispatchAttemptId", u.DispatchAttemptID); err != nil {
		return time.Time{}, nil, err
	}
	if err := checkID("fencingToken", u.FencingToken); err != nil {
		return time.Time{}, nil, err
	}
	expiry, err := parseExpiry(u.ExpiresAt)
	if err != nil {
		return time.Time{}, nil, invalid("expiresAt is not an RFC 3339 time")
	}
	mac, err := base64.RawURLEncoding.Strict().DecodeString(u.MAC)
	if err != nil || len(mac) != macBytes {
		return time.Time{}, nil, invalid("mac is not the base64url encoding of %d bytes", macBytes)
	}
	return expiry, mac, nil
}

// parseExpiry parses a bounded RFC 3339 time (fractional seconds allowed).
func parseExpiry(s string) (time.Time, error) {
	if len(s) > maxExpiryBytes {
		return time.Time{}, errors.New("expiry too long")
	}
	return time.Parse(time.RFC3339, s)
}

// checkID checks an attempt id or fencing token: 1-256 printable ASCII
// characters without spaces (so that the newline-joined MAC input is
// unambiguous).
func checkID(field, s string) error {
	if s == "" || len(s) > maxIDBytes {
		return invalid("%s must be 1-%d characters", field, maxIDBytes)
	}
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] > '~' {
			return invalid("%s must be printable ASCII without spaces", field)
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return failure.New(UpdateInvalid, "lease update: "+format, args...)
}
