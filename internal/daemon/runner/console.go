package runner

import (
	"time"

	"github.com/forgedev/forged/internal/daemon/metrics"
	"github.com/forgedev/forged/messages"
)

// The console's frame and its parts are the API's (package messages).
type (
	ActorView    = messages.ActorView
	AttemptView  = messages.AttemptView
	ConsoleFrame = messages.ConsoleFrame
)

// consoleAttempts is how many attempts a frame lists, newest first.
const consoleAttempts = 20

// Console takes one console frame: the actor tree with each actor's
// counters, the supervisor's snapshot, and the newest attempts with their
// timelines.
func (r *Runner) Console() ConsoleFrame {
	frame := ConsoleFrame{At: time.Now().UTC(), Actors: []ActorView{}, Attempts: []AttemptView{}}
	for _, reply := range r.Inspect() {
		view := ActorView{InspectReply: reply}
		if stats, ok := r.metrics.ActorStats(reply.PID); ok {
			view.Stats = &stats
		}
		frame.Actors = append(frame.Actors, view)
	}
	if snap, err := r.Snapshot(); err == nil {
		frame.Snapshot = &snap
	}
	for _, summary := range r.logs.List(StateAll, consoleAttempts) {
		timeline := r.metrics.Timeline(summary.AttemptID)
		if timeline == nil {
			timeline = []metrics.PhaseSpan{}
		}
		frame.Attempts = append(frame.Attempts, AttemptView{AttemptSummary: summary, Timeline: timeline})
	}
	return frame
}
