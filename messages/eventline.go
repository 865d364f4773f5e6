package messages

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"strconv"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// Bounds on one worker event, as the seed enforces them.
const (
	maxEventRole      = 64
	maxEventKind      = 128
	maxEventType      = 128
	maxEventContent   = 256 * 1024
	maxEventDataBytes = 256 * 1024
)

// Roles of events. Only the host and the worker speak as RoleRunner; a
// worker line is believed to be the worker's only when its MAC verifies
// (see EventVerifier). Everything else is the task's: RoleAgent.
const (
	RoleRunner = "runner"
	RoleAgent  = "agent"
)

// eventKeyLabel separates the event key from the lease key it derives
// from: a MAC under one can never be taken for a MAC under the other.
const eventKeyLabel = "forged/v1/runner-event-key"

// EventKey derives the key that authenticates the worker's runner events
// from the attempt's lease control key (HMAC-SHA256 of a fixed label). The
// control key travels only in the start packet, so only the host and the
// worker know it.
func EventKey(controlKey string) []byte {
	m := hmac.New(sha256.New, []byte(controlKey))
	m.Write([]byte(eventKeyLabel))
	return m.Sum(nil)
}

// eventMAC is the MAC of one runner event line: HMAC-SHA256 over the line
// number and the exact bytes of the event object.
func eventMAC(key []byte, seq uint64, event []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(strconv.FormatUint(seq, 10)))
	m.Write([]byte{'\n'})
	m.Write(event)
	return m.Sum(nil)
}

// signedLine is the wire form of an authenticated runner event line.
type signedLine struct {
	Type  string          `json:"type"`
	Seq   uint64          `json:"seq"`
	Event json.RawMessage `json:"event"`
	MAC   string          `json:"mac"`
}

// SignEventLine renders ev as one runner event line (newline included)
// carrying seq and the MAC of both under key. seq must grow with each line
// of an attempt: the verifier refuses any number it has seen or passed.
func SignEventLine(key []byte, seq uint64, ev Event) ([]byte, error) {
	event, err := json.Marshal(ev)
	if err != nil {
		return nil, err
	}
	line, err := json.Marshal(signedLine{
		Type: RunnerEventType, Seq: seq, Event: event,
		MAC: base64.RawURLEncoding.EncodeToString(eventMAC(key, seq, event)),
	})
	if err != nil {
		return nil, err
	}
	return append(line, '\n'), nil
}

// EventVerifier decides the role of each event line read from the worker's
// stdout. The task shares that stream (it can open /proc/1/fd/1), so the
// line's own claim means nothing: an event keeps RoleRunner only when its
// MAC verifies under the attempt's event key and its sequence number is
// greater than every one verified before (no replay, no reordering);
// every other event is demoted to RoleAgent, whatever it claims. A
// verifier is used by one goroutine.
type EventVerifier struct {
	key      []byte
	next     uint64
	Demoted  int  // runner event lines that did not verify (the task's, made agent text)
	Verified int  // events whose MAC verified
	resumed  bool // NewResumedEventVerifier: drop lines the log delivered
}

// NewEventVerifier returns a verifier for one attempt's event key. With an
// empty key nothing verifies.
func NewEventVerifier(key []byte) *EventVerifier { return &EventVerifier{key: key} }

// Parse decodes one line of the worker's stdout. A line that is not a
// runner event is noise: (nil, nil). A runner event whose MAC verifies is
// the worker's, decoded strictly: a malformed one is
// failure.SandboxEventInvalid (the worker broke the protocol). Any other
// runner event line is the task's, whatever it claims, and never an error:
// it arrives as agent text (unverifiedEvent), with the host's event type
// and time.
func (v *EventVerifier) Parse(line []byte) (*Event, error) {
	env, ok := parseEnvelope(line)
	if !ok {
		return nil, nil
	}
	if v.verify(env) {
		ev, err := decodeEvent(env.Event)
		if err != nil {
			return nil, err
		}
		v.Verified++
		return ev, nil
	}
	if v.delivered(env) {
		return nil, nil
	}
	v.Demoted++
	return unverifiedEvent(line, env), nil
}

// TaskOutputEventType is the event type of the task's output lines (the
// worker's task_output events, and the lines the task wrote past it).
const TaskOutputEventType = "task_output"

// UnverifiedStream is the "stream" of an event's data when the line did
// not come from the worker: the task wrote it into the host's stream past
// the worker (through /proc/1/fd/1).
const UnverifiedStream = "unverified"

// unverifiedEvent is the agent text a runner event line becomes when its
// MAC does not verify: role agent, kind checkpoint, the host's event type
// (task_output, as the worker gives the task's own lines) and the host's
// time. Its content is the claimed content of a well-formed event, else
// the line itself (valid UTF-8, bounded); its data says where it came from
// and what event type it claimed.
func unverifiedEvent(line []byte, env envelope) *Event {
	data := map[string]any{"stream": UnverifiedStream}
	content := ""
	if claimed, err := decodeEvent(env.Event); err == nil {
		content = claimed.Content
		data["claimedEventType"] = claimed.EventType
	} else {
		content = text.Clip(strings.ToValidUTF8(string(bytes.TrimSpace(line)), "\uFFFD"), maxEventContent)
		data["malformed"] = true
	}
	raw, _ := json.Marshal(data)
	d := string(raw)
	return &Event{Role: RoleAgent, Kind: KindCheckpoint, EventType: TaskOutputEventType, Content: content, Data: &d, OccurredAt: time.Now().UTC()}
}

func (v *EventVerifier) verify(env envelope) bool {
	if len(v.key) == 0 || env.Seq == nil || env.MAC == nil || *env.Seq < v.next {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(*env.MAC)
	if err != nil || !hmac.Equal(got, eventMAC(v.key, *env.Seq, env.Event)) {
		return false
	}
	v.next = *env.Seq + 1
	return true
}

// ParseRunnerEventLine parses one stdout line of the worker without a key:
// lines that are not JSON objects, or not runner events, yield (nil, nil),
// and every runner event comes back as the agent text of an unverified
// line (see EventVerifier.Parse, which keeps the worker's own events). The
// worker is untrusted: nothing here panics.
func ParseRunnerEventLine(line []byte) (*Event, error) {
	return NewEventVerifier(nil).Parse(line)
}

// envelope is a runner event line before its event is decoded.
type envelope struct {
	Type  string          `json:"type"`
	Seq   *uint64         `json:"seq"`
	Event json.RawMessage `json:"event"`
	MAC   *string         `json:"mac"`
}

// parseEnvelope decodes a line's envelope; ok is false when the line is
// not a runner event (noise).
func parseEnvelope(line []byte) (envelope, bool) {
	trimmed := bytes.TrimSpace(line)
	var env envelope
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return env, false
	}
	if err := json.Unmarshal(trimmed, &env); err != nil || env.Type != RunnerEventType {
		return env, false
	}
	return env, true
}

// decodeEvent decodes an event object strictly within the field bounds.
func decodeEvent(event json.RawMessage) (*Event, error) {
	var raw struct {
		Role       *string `json:"role"`
		Kind       *string `json:"kind"`
		Content    *string `json:"content"`
		EventType  *string `json:"eventType"`
		Data       *string `json:"data"`
		OccurredAt *string `json:"occurredAt"`
	}
	if len(event) == 0 || json.Unmarshal(event, &raw) != nil {
		return nil, failure.New(failure.SandboxEventInvalid, "runner event envelope is missing event data")
	}
	if raw.Role == nil || raw.Kind == nil || raw.Content == nil || raw.EventType == nil {
		return nil, failure.New(failure.SandboxEventInvalid, "role, kind, content and eventType must be strings")
	}
	if len(*raw.Role) > maxEventRole || len(*raw.Kind) > maxEventKind || len(*raw.EventType) > maxEventType || len(*raw.Content) > maxEventContent {
		return nil, failure.New(failure.SandboxEventInvalid, "runner event exceeds field bounds")
	}
	if raw.Data != nil && len(*raw.Data) > maxEventDataBytes {
		return nil, failure.New(failure.SandboxEventInvalid, "runner event data exceeds field bounds")
	}
	ev := &Event{Role: *raw.Role, Kind: *raw.Kind, Content: *raw.Content, EventType: *raw.EventType, Data: raw.Data, OccurredAt: time.Now().UTC()}
	if raw.OccurredAt != nil {
		at, err := time.Parse(time.RFC3339Nano, *raw.OccurredAt)
		if err != nil {
			return nil, failure.New(failure.SandboxEventInvalid, "runner event occurredAt is invalid")
		}
		ev.OccurredAt = at
	}
	return ev, nil
}
