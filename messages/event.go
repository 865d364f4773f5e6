package messages

import (
	"encoding/json"
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

// RunnerEvent builds a host-side checkpoint event (role "runner"). The
// kind comes from where the event is made, never from its name: failures
// are built with FailureEvent. data, when not nil, is marshalled to a JSON
// string.
func RunnerEvent(eventType, content string, data any) Event {
	return runnerEvent(KindCheckpoint, eventType, content, data)
}

// FailureEvent builds a host-side failure event (role "runner", kind
// "error"): an attempt's failure code, a failed teardown or lease push.
func FailureEvent(eventType, content string, data any) Event {
	return runnerEvent(KindError, eventType, content, data)
}

func runnerEvent(kind, eventType, content string, data any) Event {
	ev := Event{Role: "runner", Kind: kind, EventType: eventType, Content: content, OccurredAt: time.Now().UTC()}
	if data != nil {
		if raw, err := json.Marshal(data); err == nil {
			s := string(raw)
			ev.Data = &s
		}
	}
	return ev
}
