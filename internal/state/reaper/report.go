package reaper

import (
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/kit/text"
	"strings"
	"time"
	"unicode"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/state/ledger"
	"github.com/forgedev/forged/messages"
)

// Bounds of a label-phase action.
const (
	maxResourceID = 255
	maxMessage    = 1000
)

// actionLog collects the label phase's removals.
type actionLog []messages.CleanupAction

// record adds the outcome of removing obj, owned by owner, at now.
func (l *actionLog) record(owner dockerops.Ownership, obj Object, err error, now time.Time) {
	a := messages.CleanupAction{
		DispatchAttemptID: owner.AttemptID,
		FencingToken:      owner.FencingToken,
		RunnerInstanceID:  owner.RunnerInstanceID,
		ResourceType:      obj.Kind,
		ResourceID:        text.Clip(obj.ID, maxResourceID),
		Outcome:           ledger.OutcomeRemoved,
		OccurredAt:        now.UTC(),
	}
	if err != nil {
		a.Outcome = ledger.OutcomeFailed
		a.Message = failureMessage(err)
	}
	*l = append(*l, a)
}

// storeActions stores the label phase's actions durably as reaper
// reports of at most ledger.MaxReportActions actions each. Remaining
// counts the failed removals: those objects are still there.
func (s *sweep) storeActions(actions actionLog) {
	if s.cfg.DryRun {
		return
	}
	for len(actions) > 0 {
		n := min(len(actions), ledger.MaxReportActions)
		chunk := actions[:n]
		actions = actions[n:]
		report := messages.CleanupReport{ReportID: ids.NewUUID(), Source: ledger.SourceReaper, Actions: chunk}
		for _, a := range chunk {
			if a.Outcome == ledger.OutcomeFailed {
				report.Remaining++
			}
		}
		if err := s.store.PersistReport(report); err != nil {
			s.errs = append(s.errs, err)
			continue
		}
		s.round.Reports = append(s.round.Reports, report)
	}
}

// failureMessage is a bounded, single-line rendering of a removal error.
func failureMessage(err error) string {
	msg := strings.Join(strings.FieldsFunc(err.Error(), func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r)
	}), " ")
	if msg = text.Clip(msg, maxMessage); msg == "" {
		return "Docker object removal failed"
	}
	return msg
}
