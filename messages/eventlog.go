package messages

import (
	"bytes"
	"crypto/hmac"
	"encoding/base64"

	"github.com/forgedev/forged/failure"
)

// The worker's event log. Besides streaming its signed event lines on
// stdout, the worker appends each one, before it writes it there, to
// EventLogPath in the control volume, so that a forged process that
// restarts while the worker runs can read what it missed and resume the
// stream exactly (see ParseEventLog).

// WorkerProtocolVersion is the version of the protocol between forged and
// the worker it starts: the start packet, the signed event lines, the
// event log, lease updates and the release signal. A forged re-adopts a
// worker only when it speaks that worker's version (KnownWorkerProtocol).
const WorkerProtocolVersion = 1

// KnownWorkerProtocol reports whether this forged speaks worker protocol
// version v.
func KnownWorkerProtocol(v int) bool { return v == WorkerProtocolVersion }

// EventLogPath is the worker's event log inside the sandbox.
const EventLogPath = "/control/events.log"

// MaxEventLogBytes bounds the event log. The worker stops appending once
// a line would pass it (a log cut short cannot be resumed from beyond its
// end, and re-adoption then refuses it); the task output forwarded as
// events is itself bounded well below it.
const MaxEventLogBytes = 32 << 20

// LoggedEvent is one event of the worker's log and its sequence number.
type LoggedEvent struct {
	Seq   uint64
	Event Event
}

// ParseEventLog checks a whole event log read from the control volume
// under the attempt's event key and returns its events in order. Every
// complete line must be a runner event line whose MAC verifies and whose
// sequence number is the previous one plus one, starting at 0; an
// incomplete last line (the worker was writing it) is left out. Anything
// else, or a log larger than MaxEventLogBytes, is refused with
// failure.SandboxEventLogInvalid: the log is the task's to tamper with
// (it runs as the worker's uid), never to forge.
func ParseEventLog(key []byte, data []byte) ([]LoggedEvent, error) {
	if len(key) == 0 {
		return nil, failure.New(failure.SandboxEventLogInvalid, "no event key to check the event log with")
	}
	if len(data) > MaxEventLogBytes {
		return nil, failure.New(failure.SandboxEventLogInvalid, "the event log holds %d bytes, more than %d", len(data), MaxEventLogBytes)
	}
	var events []LoggedEvent
	next := uint64(0)
	for len(data) > 0 {
		end := bytes.IndexByte(data, '\n')
		if end < 0 {
			break // the line being written
		}
		line := data[:end]
		data = data[end+1:]
		env, ok := parseEnvelope(line)
		if !ok {
			return nil, failure.New(failure.SandboxEventLogInvalid, "event log line %d is not a runner event line", next)
		}
		ev, err := decodeEvent(env.Event)
		switch {
		case err != nil:
			return nil, failure.Wrap(failure.SandboxEventLogInvalid, err, "event log line %d", next)
		case env.Seq == nil || env.MAC == nil:
			return nil, failure.New(failure.SandboxEventLogInvalid, "event log line %d is not signed", next)
		case *env.Seq != next:
			return nil, failure.New(failure.SandboxEventLogInvalid, "event log line %d carries sequence number %d", next, *env.Seq)
		}
		mac, err := base64.RawURLEncoding.DecodeString(*env.MAC)
		if err != nil || !hmac.Equal(mac, eventMAC(key, next, env.Event)) {
			return nil, failure.New(failure.SandboxEventLogInvalid, "event log line %d does not verify under the attempt's event key", next)
		}
		events = append(events, LoggedEvent{Seq: next, Event: *ev})
		next++
	}
	return events, nil
}

// NewResumedEventVerifier is a verifier for a stream re-attached after the
// host read the event log up to (not including) sequence number next: a
// worker line that verifies below the next number expected is one already
// delivered (by the log, or earlier on the stream: a task's replay), and
// Parse drops it (nil, nil) instead of demoting it to the agent's.
func NewResumedEventVerifier(key []byte, next uint64) *EventVerifier {
	return &EventVerifier{key: key, next: next, resumed: true}
}

// Next is the sequence number the next worker line must carry at least:
// one past the last verified.
func (v *EventVerifier) Next() uint64 { return v.next }

// delivered reports whether env is a worker line the log already
// delivered (a resumed verifier only).
func (v *EventVerifier) delivered(env envelope) bool {
	if !v.resumed || len(v.key) == 0 || env.Seq == nil || env.MAC == nil || *env.Seq >= v.next {
		return false
	}
	got, err := base64.RawURLEncoding.DecodeString(*env.MAC)
	return err == nil && hmac.Equal(got, eventMAC(v.key, *env.Seq, env.Event))
}
