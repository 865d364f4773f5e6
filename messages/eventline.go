package messages

import (
	"bytes"
	"encoding/json"
	"time"

	"github.com/forgedev/forged/failure"
)

// Bounds on one worker event, as the seed enforces them.
const (
	maxEventRole      = 64
	maxEventKind      = 128
	maxEventType      = 128
	maxEventContent   = 256 * 1024
	maxEventDataBytes = 256 * 1024
)

// ParseRunnerEventLine parses one stdout line of the worker. Lines that are
// not JSON objects, or not runner events, yield (nil, nil): they are noise,
// not events. A runner event that breaks the field bounds is refused with
// failure.SandboxEventInvalid. The worker is untrusted: nothing here panics.
func ParseRunnerEventLine(line []byte) (*Event, error) {
	trimmed := bytes.TrimSpace(line)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, nil
	}
	var envelope struct {
		Type  string          `json:"type"`
		Event json.RawMessage `json:"event"`
	}
	if err := json.Unmarshal(trimmed, &envelope); err != nil || envelope.Type != RunnerEventType {
		return nil, nil
	}
	var raw struct {
		Role       *string `json:"role"`
		Kind       *string `json:"kind"`
		Content    *string `json:"content"`
		EventType  *string `json:"eventType"`
		Data       *string `json:"data"`
		OccurredAt *string `json:"occurredAt"`
	}
	if len(envelope.Event) == 0 || json.Unmarshal(envelope.Event, &raw) != nil {
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
