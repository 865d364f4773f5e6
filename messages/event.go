package messages

import (
	"encoding/json"
	"regexp"
	"time"
)

// Event is one entry of an attempt's event stream, shaped as the seed's
// runner events: role, kind, eventType, content, optional JSON data (as a
// string) and the time it occurred.
type Event struct {
	Role       string    `json:"role"`
	Kind       string    `json:"kind"`
	EventType  string    `json:"eventType"`
	Content    string    `json:"content"`
	Data       *string   `json:"data"`
	OccurredAt time.Time `json:"occurredAt"`
}

// Event kinds.
const (
	KindCheckpoint = "checkpoint"
	KindError      = "error"
)

var errorEventType = regexp.MustCompile(`(?i)(failed|timeout|expired|exhausted|killed|rejected|invalid|unavailable|limit|cancelled|unsupported)`)

// RunnerEvent builds a host-side event (role "runner"). The kind is "error"
// when the event type names a failure, "checkpoint" otherwise. data, when not
// nil, is marshalled to a JSON string.
func RunnerEvent(eventType, content string, data any) Event {
	kind := KindCheckpoint
	if errorEventType.MatchString(eventType) {
		kind = KindError
	}
	ev := Event{Role: "runner", Kind: kind, EventType: eventType, Content: content, OccurredAt: time.Now().UTC()}
	if data != nil {
		if raw, err := json.Marshal(data); err == nil {
			s := string(raw)
			ev.Data = &s
		}
	}
	return ev
}
