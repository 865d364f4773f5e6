package ledger

import (
	"encoding/json"
	"errors"
	"fmt"
	"github.com/forgedev/forged/internal/kit/text"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/messages"
)

// Bounds of the cleanup-report store.
const (
	// MaxReportBytes bounds one report file.
	MaxReportBytes = 256 * 1024
	// MaxPendingReports bounds how many report files one PendingReports
	// call reads.
	MaxPendingReports = 256
	// MaxReportActions bounds the actions of one report.
	MaxReportActions = 128
	// maxActionMessage bounds an action's message, in bytes.
	maxActionMessage = 1000
)

// Report sources and action outcomes a report may carry.
const (
	SourceTeardown = "teardown"
	SourceReaper   = "reaper"

	OutcomeRemoved = "removed"
	OutcomeFailed  = "failed"
)

var (
	// reportID is a UUID of version 1 to 5, in either case.
	reportID = regexp.MustCompile(`(?i)^[0-9a-f]{8}-[0-9a-f]{4}-[1-5][0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	// actionID is the looser identity form the seed accepts in actions:
	// 32 to 36 hex digits and hyphens.
	actionID = regexp.MustCompile(`(?i)^[0-9a-f-]{32,36}$`)
)

// ValidateReport reports CodeReportInvalid, naming the problem, unless r
// is a well-formed cleanup report: a UUID report id, source "teardown" or
// "reaper", at most 128 actions, and each action with identity-shaped
// attempt, fencing and instance ids, a known resource type, a resource id
// of 1 to 255 bytes without control characters, outcome "removed" or
// "failed", a message of at most 1000 bytes and a timestamp.
func ValidateReport(r messages.CleanupReport) error {
	switch {
	case !reportID.MatchString(r.ReportID):
		return reportInvalid("report id %q is not a UUID", text.Ellipsis(r.ReportID, 64))
	case r.Source != SourceTeardown && r.Source != SourceReaper:
		return reportInvalid("source %q is neither %q nor %q", text.Ellipsis(r.Source, 32), SourceTeardown, SourceReaper)
	case r.Actions == nil:
		return reportInvalid("actions are missing")
	case len(r.Actions) > MaxReportActions:
		return reportInvalid("%d actions, more than %d", len(r.Actions), MaxReportActions)
	case r.Remaining < 0:
		return reportInvalid("remaining count %d is negative", r.Remaining)
	}
	for i, a := range r.Actions {
		if err := validAction(a); err != nil {
			return reportInvalid("action %d: %v", i, err)
		}
	}
	return nil
}

// validAction checks one action of a report.
func validAction(a messages.CleanupAction) error {
	switch {
	case !actionID.MatchString(a.DispatchAttemptID):
		return errors.New("dispatch attempt id is not an id")
	case !actionID.MatchString(a.FencingToken):
		return errors.New("fencing token is not an id")
	case !actionID.MatchString(a.RunnerInstanceID):
		return errors.New("runner instance id is not an id")
	case !knownResourceType(a.ResourceType):
		return fmt.Errorf("resource type %q is unknown", text.Ellipsis(a.ResourceType, 32))
	case !boundedText(a.ResourceID, 1, maxNameBytes):
		return errors.New("resource id is empty, too long or has control characters")
	case a.Outcome != OutcomeRemoved && a.Outcome != OutcomeFailed:
		return fmt.Errorf("outcome %q is unknown", text.Ellipsis(a.Outcome, 32))
	case len(a.Message) > maxActionMessage:
		return fmt.Errorf("message is longer than %d bytes", maxActionMessage)
	case a.OccurredAt.IsZero():
		return errors.New("occurredAt is missing")
	}
	return nil
}

// PersistReport durably stores r under its report id before anyone
// acknowledges it. A report without actions is not stored (nothing was
// cleaned up); a report already stored is left as it is. An invalid report
// is refused with CodeReportInvalid.
func (s Store) PersistReport(r messages.CleanupReport) error {
	if len(r.Actions) == 0 {
		return nil
	}
	r = RedactReport(r)
	if err := ValidateReport(r); err != nil {
		return err
	}
	name := fileName(r.ReportID)
	if _, err := os.Lstat(filepath.Join(s.ReportDir(), name)); err == nil {
		return nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return ioError(err, "inspect report %s", r.ReportID)
	}
	data, err := json.Marshal(r)
	if err != nil {
		return failure.Wrap(CodeReportInvalid, err, "encode report")
	}
	if len(data)+1 > MaxReportBytes {
		return reportInvalid("report %s would be %d bytes, more than %d", r.ReportID, len(data)+1, MaxReportBytes)
	}
	return writeDurable(s.ReportDir(), name, append(data, '\n'))
}

// PendingReports returns the stored reports that have not been
// acknowledged. Corrupt reports are skipped (and kept on disk); see
// ScanReports to list them.
func (s Store) PendingReports() ([]messages.CleanupReport, error) {
	reports, _, err := s.ScanReports()
	return reports, err
}

// ScanReports reads at most MaxPendingReports report files (in name
// order) and returns the valid reports and the corrupt files: oversized,
// not regular files (symbolic links are never followed), undecodable,
// invalid, or named after another report id.
func (s Store) ScanReports() ([]messages.CleanupReport, []Corrupt, error) {
	return scanRecords(s.ReportDir(), MaxPendingReports, readReport)
}

// AcknowledgeReport deletes a stored report durably once the server has
// it. An unknown report is not an error; an id that is not a UUID is
// CodeReportInvalid.
func (s Store) AcknowledgeReport(id string) error {
	if !reportID.MatchString(id) {
		return reportInvalid("report id %q is not a UUID", text.Ellipsis(id, 64))
	}
	return removeDurable(s.ReportDir(), fileName(id))
}

// readReport reads and validates one report file. A non-empty reason says
// why it cannot be trusted; err is set only when the file is missing.
func readReport(path string) (r messages.CleanupReport, reason string, err error) {
	data, err := readBounded(path, MaxReportBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r, "", err
	case errors.Is(err, errTooLarge):
		return r, fmt.Sprintf("larger than %d bytes", MaxReportBytes), nil
	case err != nil:
		return r, err.Error(), nil
	}
	if err := strictjson.Decode(data, &r); err != nil {
		return messages.CleanupReport{}, "undecodable: " + err.Error(), nil
	}
	if err := ValidateReport(r); err != nil {
		return messages.CleanupReport{}, err.Error(), nil
	}
	if filepath.Base(path) != fileName(r.ReportID) {
		return messages.CleanupReport{}, "file name does not match its report id", nil
	}
	return r, "", nil
}

// reportInvalid is a CodeReportInvalid error.
func reportInvalid(format string, args ...any) error {
	return failure.New(CodeReportInvalid, format, args...)
}
