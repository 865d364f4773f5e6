package lease

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

const (
	testAttempt = "0b6f6a3e-8d0e-4c1a-9f53-2f3c1e2d4a5b"
	testFence   = "11111111-2222-4333-8444-555555555555"
)

var testKey = mustKey()

func mustKey() string {
	k, err := NewControlKey()
	if err != nil {
		panic(err)
	}
	return k
}

// manualClock is a Clock whose wall and monotonic readings the test moves
// independently.
type manualClock struct {
	mu   sync.Mutex
	wall time.Time
	mono time.Duration
}

func newManualClock() *manualClock {
	return &manualClock{wall: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC), mono: 1000 * time.Hour}
}

func (c *manualClock) Now() (time.Time, time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wall, c.mono
}

// advance lets time pass: both readings move.
func (c *manualClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = c.wall.Add(d)
	c.mono += d
}

// setWall sets the wall clock only, as an operator or NTP step would.
func (c *manualClock) setWall(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.wall = t
}

func sign(t *testing.T, attempt, fence string, at time.Time, key string) Update {
	t.Helper()
	u, err := Sign(attempt, fence, at, key)
	require.NoError(t, err)
	return u
}

func TestNewControlKey(t *testing.T) {
	k1, err := NewControlKey()
	require.NoError(t, err)
	k2, err := NewControlKey()
	require.NoError(t, err)
	assert.NotEqual(t, k1, k2)
	raw, err := base64.RawURLEncoding.Strict().DecodeString(k1)
	require.NoError(t, err)
	assert.Len(t, raw, 32)
	assert.Len(t, k1, 43)
}

func TestSignMatchesTheSeedConstruction(t *testing.T) {
	at := time.Date(2031, 5, 6, 7, 8, 9, 123_000_000, time.FixedZone("X", 2*3600))
	u := sign(t, testAttempt, testFence, at, "the-key")
	assert.Equal(t, UpdateSchema, u.SchemaVersion)
	assert.Equal(t, testAttempt, u.DispatchAttemptID)
	assert.Equal(t, testFence, u.FencingToken)
	assert.Equal(t, "2031-05-06T05:08:09.123Z", u.ExpiresAt)
	// HMAC-SHA256 keyed with the key string's bytes over the three fields
	// joined by newlines, base64url without padding.
	m := hmac.New(sha256.New, []byte("the-key"))
	m.Write([]byte(testAttempt + "\n" + testFence + "\n" + "2031-05-06T05:08:09.123Z"))
	assert.Equal(t, base64.RawURLEncoding.EncodeToString(m.Sum(nil)), u.MAC)
	require.NoError(t, u.Validate())

	raw, err := json.Marshal(u)
	require.NoError(t, err)
	assert.Equal(t, `{"schemaVersion":1,"dispatchAttemptId":"`+testAttempt+`","fencingToken":"`+testFence+
		`","expiresAt":"2031-05-06T05:08:09.123Z","mac":"`+u.MAC+`"}`, string(raw))
	back, err := DecodeUpdate(raw)
	require.NoError(t, err)
	assert.Equal(t, u, back)
}

func TestSignRefuses(t *testing.T) {
	at := time.Now().Add(time.Hour)
	for name, fn := range map[string]func() (Update, error){
		"empty attempt":    func() (Update, error) { return Sign("", testFence, at, testKey) },
		"newline in fence": func() (Update, error) { return Sign(testAttempt, "a\nb", at, testKey) },
		"empty key":        func() (Update, error) { return Sign(testAttempt, testFence, at, "") },
		"year beyond 9999": func() (Update, error) {
			return Sign(testAttempt, testFence, time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC), testKey)
		},
		"negative year": func() (Update, error) {
			return Sign(testAttempt, testFence, time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC), testKey)
		},
		"oversized attempt": func() (Update, error) { return Sign(strings.Repeat("a", 257), testFence, at, testKey) },
	} {
		t.Run(name, func(t *testing.T) {
			_, err := fn()
			assert.Equal(t, UpdateInvalid, failure.CodeOf(err), "%v", err)
		})
	}
}

func TestApply(t *testing.T) {
	clock := newManualClock()
	wall, _ := clock.Now()
	current := wall.Add(time.Minute)
	later := wall.Add(10 * time.Minute)
	valid := sign(t, testAttempt, testFence, later, testKey)

	mutate := func(fn func(*Update)) Update {
		u := valid
		fn(&u)
		return u
	}
	macBytes, _ := base64.RawURLEncoding.DecodeString(valid.MAC)
	flipped := append([]byte{}, macBytes...)
	flipped[0] ^= 1

	cases := []struct {
		name   string
		update Update
		code   failure.Code // "" means accepted
	}{
		{"valid renewal", valid, ""},
		{"wrong attempt", sign(t, "ffffffff-8d0e-4c1a-9f53-2f3c1e2d4a5b", testFence, later, testKey), UpdateForbidden},
		{"wrong fence", sign(t, testAttempt, "99999999-2222-4333-8444-555555555555", later, testKey), UpdateForbidden},
		{"other key", sign(t, testAttempt, testFence, later, mustKey()), UpdateForbidden},
		{"equal expiry", sign(t, testAttempt, testFence, current, testKey), UpdateStale},
		{"earlier expiry", sign(t, testAttempt, testFence, current.Add(-time.Second), testKey), UpdateStale},
		{"one nanosecond later", sign(t, testAttempt, testFence, current.Add(time.Nanosecond), testKey), ""},
		{"expiry in the past but later", sign(t, testAttempt, testFence, current.Add(-time.Hour), testKey), UpdateStale},
		{"bad MAC", mutate(func(u *Update) { u.MAC = base64.RawURLEncoding.EncodeToString(flipped) }), UpdateForbidden},
		{"MAC of other fields", mutate(func(u *Update) { u.ExpiresAt = wall.Add(time.Hour).UTC().Format(time.RFC3339) }), UpdateForbidden},
		{"truncated MAC", mutate(func(u *Update) { u.MAC = u.MAC[:len(u.MAC)-1] }), UpdateInvalid},
		{"MAC of 31 bytes", mutate(func(u *Update) { u.MAC = base64.RawURLEncoding.EncodeToString(macBytes[:31]) }), UpdateInvalid},
		{"MAC of 33 bytes", mutate(func(u *Update) { u.MAC = base64.RawURLEncoding.EncodeToString(append(macBytes, 0)) }), UpdateInvalid},
		{"padded MAC", mutate(func(u *Update) { u.MAC = base64.URLEncoding.EncodeToString(macBytes) }), UpdateInvalid},
		{"standard base64 MAC", mutate(func(u *Update) { u.MAC = base64.StdEncoding.EncodeToString(macBytes) }), UpdateInvalid},
		{"empty MAC", mutate(func(u *Update) { u.MAC = "" }), UpdateInvalid},
		{"malformed expiry", mutate(func(u *Update) { u.ExpiresAt = "tomorrow" }), UpdateInvalid},
		{"expiry without zone", mutate(func(u *Update) { u.ExpiresAt = strings.TrimSuffix(u.ExpiresAt, "Z") }), UpdateInvalid},
		{"expiry out of range", mutate(func(u *Update) { u.ExpiresAt = "2030-13-01T00:00:00Z" }), UpdateInvalid},
		{"empty expiry", mutate(func(u *Update) { u.ExpiresAt = "" }), UpdateInvalid},
		{"wrong schema", mutate(func(u *Update) { u.SchemaVersion = 2 }), UpdateInvalid},
		{"no schema", mutate(func(u *Update) { u.SchemaVersion = 0 }), UpdateInvalid},
		{"empty attempt", mutate(func(u *Update) { u.DispatchAttemptID = "" }), UpdateInvalid},
		{"newline in fence", mutate(func(u *Update) { u.FencingToken = testFence + "\nx" }), UpdateInvalid},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := NewDeadline(testAttempt, testFence, current, testKey, clock)
			before := d.Remaining()
			err := d.Apply(tc.update)
			if tc.code == "" {
				require.NoError(t, err)
				exp, perr := time.Parse(time.RFC3339, tc.update.ExpiresAt)
				require.NoError(t, perr)
				assert.True(t, d.ExpiresAt().Equal(exp))
				assert.Equal(t, exp.Sub(wall), d.Remaining())
				assert.Greater(t, d.Remaining(), before)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.code, failure.CodeOf(err), "%v", err)
			assert.True(t, d.ExpiresAt().Equal(current), "a refused update changes nothing")
			assert.Equal(t, before, d.Remaining())
		})
	}
}

func TestApplyRenewalsAndReplay(t *testing.T) {
	clock := newManualClock()
	wall, _ := clock.Now()
	d := NewDeadline(testAttempt, testFence, wall.Add(time.Minute), testKey, clock)
	first := sign(t, testAttempt, testFence, wall.Add(2*time.Minute), testKey)
	second := sign(t, testAttempt, testFence, wall.Add(3*time.Minute), testKey)

	require.NoError(t, d.Apply(first))
	require.NoError(t, d.Apply(second))
	assert.Equal(t, 3*time.Minute, d.Remaining())
	// Replaying either update is stale, the deadline stays.
	assert.Equal(t, UpdateStale, failure.CodeOf(d.Apply(first)))
	assert.Equal(t, UpdateStale, failure.CodeOf(d.Apply(second)))
	assert.Equal(t, 3*time.Minute, d.Remaining())
}

func TestApplyWithoutControlKey(t *testing.T) {
	clock := newManualClock()
	wall, _ := clock.Now()
	d := NewDeadline(testAttempt, testFence, wall.Add(time.Minute), "", clock)
	// An update "signed" with the empty key is refused all the same.
	u := Update{SchemaVersion: 1, DispatchAttemptID: testAttempt, FencingToken: testFence, ExpiresAt: wall.Add(time.Hour).Format(time.RFC3339)}
	u.MAC = base64.RawURLEncoding.EncodeToString(computeMAC(u.DispatchAttemptID, u.FencingToken, u.ExpiresAt, ""))
	assert.Equal(t, UpdateForbidden, failure.CodeOf(d.Apply(u)))
	assert.Equal(t, time.Minute, d.Remaining())
}

func TestDeadlineIsMonotonic(t *testing.T) {
	clock := newManualClock()
	wall, _ := clock.Now()
	d := NewDeadline(testAttempt, testFence, wall.Add(time.Minute), testKey, clock)
	assert.Equal(t, time.Minute, d.Remaining())
	assert.False(t, d.Expired())

	// Setting the wall clock back or forward changes nothing.
	clock.setWall(wall.Add(-time.Hour))
	assert.Equal(t, time.Minute, d.Remaining())
	clock.setWall(wall.Add(time.Hour))
	assert.Equal(t, time.Minute, d.Remaining())
	assert.False(t, d.Expired())

	// Time passing does.
	clock.advance(59 * time.Second)
	assert.Equal(t, time.Second, d.Remaining())
	assert.False(t, d.Expired())
	clock.advance(time.Second)
	assert.Equal(t, time.Duration(0), d.Remaining())
	assert.True(t, d.Expired())
	clock.advance(time.Hour)
	assert.Equal(t, time.Duration(0), d.Remaining())
	assert.True(t, d.Expired())
	assert.True(t, d.ExpiresAt().Equal(wall.Add(time.Minute)), "the wall-clock expiry is kept as signed")
}

func TestApplyConvertsWithTheCurrentWallClock(t *testing.T) {
	// An update is converted when applied: remaining = expiry - wall now,
	// counted from the monotonic now; later wall steps do not move it.
	clock := newManualClock()
	wall, _ := clock.Now()
	d := NewDeadline(testAttempt, testFence, wall.Add(time.Minute), testKey, clock)
	clock.advance(30 * time.Second)
	require.NoError(t, d.Apply(sign(t, testAttempt, testFence, wall.Add(2*time.Minute), testKey)))
	assert.Equal(t, 90*time.Second, d.Remaining())
	clock.setWall(wall.Add(24 * time.Hour))
	assert.Equal(t, 90*time.Second, d.Remaining())
	assert.False(t, d.Expired())
	clock.advance(90 * time.Second)
	assert.True(t, d.Expired())
}

func TestDeadlineEdges(t *testing.T) {
	clock := newManualClock()
	wall, _ := clock.Now()
	past := NewDeadline(testAttempt, testFence, wall.Add(-time.Minute), testKey, clock)
	assert.True(t, past.Expired())
	assert.Equal(t, time.Duration(0), past.Remaining())
	// A renewal can revive a lease whose deadline has passed (the worker
	// reads the update file only when its deadline is reached).
	require.NoError(t, past.Apply(sign(t, testAttempt, testFence, wall.Add(time.Minute), testKey)))
	assert.False(t, past.Expired())

	far := NewDeadline(testAttempt, testFence, time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC), testKey, clock)
	assert.False(t, far.Expired(), "no overflow to the past")
	assert.Positive(t, far.Remaining())

	zero := NewDeadline(testAttempt, testFence, time.Time{}, testKey, nil)
	assert.True(t, zero.Expired())

	real := NewDeadline(testAttempt, testFence, time.Now().Add(time.Hour), testKey, nil)
	assert.False(t, real.Expired())
	assert.InDelta(t, float64(time.Hour), float64(real.Remaining()), float64(time.Second))
}

func TestDeadlineConcurrentUse(t *testing.T) {
	d := NewDeadline(testAttempt, testFence, time.Now().Add(time.Minute), testKey, nil)
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			u, _ := Sign(testAttempt, testFence, time.Now().Add(time.Duration(i+2)*time.Minute), testKey)
			_ = d.Apply(u)
			_ = d.Remaining()
			_ = d.Expired()
			_ = d.ExpiresAt()
		}()
	}
	wg.Wait()
	assert.Greater(t, d.Remaining(), time.Minute)
}

func TestDecodeUpdate(t *testing.T) {
	u := sign(t, testAttempt, testFence, time.Now().Add(time.Hour), testKey)
	raw, err := json.Marshal(u)
	require.NoError(t, err)
	valid := string(raw)

	got, err := DecodeUpdate([]byte("  " + valid + "\n"))
	require.NoError(t, err, "surrounding whitespace (the seed appends a newline)")
	assert.Equal(t, u, got)

	replace := func(old, new string) []byte { return []byte(strings.Replace(valid, old, new, 1)) }
	cases := map[string][]byte{
		"empty":              nil,
		"not json":           []byte("hello"),
		"array":              []byte("[" + valid + "]"),
		"null":               []byte("null"),
		"string":             []byte(`"x"`),
		"unknown member":     replace(`{"schemaVersion"`, `{"extra":1,"schemaVersion"`),
		"case-folded name":   replace(`"schemaVersion"`, `"SchemaVersion"`),
		"duplicate member":   replace(`{"schemaVersion":1`, `{"schemaVersion":1,"schemaVersion":1`),
		"missing member":     replace(`"schemaVersion":1,`, ``),
		"empty object":       []byte(`{}`),
		"case-folded twin":   replace(`{"schemaVersion":1`, `{"schemaVersion":1,"SCHEMAVERSION":1`),
		"null member":        replace(`"schemaVersion":1`, `"schemaVersion":null`),
		"float schema":       replace(`"schemaVersion":1`, `"schemaVersion":1.0`),
		"string schema":      replace(`"schemaVersion":1`, `"schemaVersion":"1"`),
		"huge schema":        replace(`"schemaVersion":1`, `"schemaVersion":1e400`),
		"schema 2":           replace(`"schemaVersion":1`, `"schemaVersion":2`),
		"number attempt":     replace(`"dispatchAttemptId":"`+testAttempt+`"`, `"dispatchAttemptId":7`),
		"trailing data":      []byte(valid + " {}"),
		"trailing garbage":   []byte(valid + "x"),
		"truncated":          []byte(valid[:len(valid)-1]),
		"too large":          []byte(valid + strings.Repeat(" ", MaxUpdateBytes)),
		"malformed expiry":   replace(`"expiresAt":"`, `"expiresAt":"x`),
		"truncated MAC":      replace(u.MAC, u.MAC[:20]),
		"invalid utf8 fence": replace(testFence, "\xff"),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			got, err := DecodeUpdate(in)
			require.Error(t, err)
			assert.Equal(t, UpdateInvalid, failure.CodeOf(err), "%v", err)
			assert.Equal(t, Update{}, got)
		})
	}
}

func FuzzDecodeUpdate(f *testing.F) {
	at := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	u, err := Sign(testAttempt, testFence, at, testKey)
	if err != nil {
		f.Fatal(err)
	}
	raw, _ := json.Marshal(u)
	f.Add(raw)
	f.Add(append(raw, '\n'))
	f.Add([]byte(`{"schemaVersion":1}`))
	f.Add([]byte(`{"schemaVersion":1,"dispatchAttemptId":"a","fencingToken":"b","expiresAt":"2030-01-01T00:00:00.5+01:00","mac":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}`))
	f.Add([]byte(`[`))
	f.Add([]byte(`{"mac":"\ud800"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		got, err := DecodeUpdate(in)
		if err != nil {
			if failure.CodeOf(err) != UpdateInvalid {
				t.Fatalf("refusal without %s: %v", UpdateInvalid, err)
			}
			if got != (Update{}) {
				t.Fatalf("refused input decoded to %+v", got)
			}
			return
		}
		// A decoded update is valid, survives a round trip unchanged and
		// can be applied without panicking.
		if err := got.Validate(); err != nil {
			t.Fatalf("decoded update does not validate: %v", err)
		}
		again, err := json.Marshal(got)
		if err != nil {
			t.Fatal(err)
		}
		back, err := DecodeUpdate(again)
		if err != nil || back != got {
			t.Fatalf("round trip: %+v, %v (was %+v)", back, err, got)
		}
		d := NewDeadline(testAttempt, testFence, at.Add(-time.Hour), testKey, newManualClock())
		err = d.Apply(got)
		switch failure.CodeOf(err) {
		case "":
			if got.MAC != u.MAC {
				t.Fatalf("accepted an update not signed with the key: %+v", got)
			}
		case UpdateForbidden, UpdateStale:
		default:
			t.Fatalf("apply of a decoded update: %v", err)
		}
	})
}
