package ledger

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func TestValidateReport(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(r *messages.CleanupReport)
		ok     bool
	}{
		{"valid", func(*messages.CleanupReport) {}, true},
		{"reaper source", func(r *messages.CleanupReport) { r.Source = SourceReaper }, true},
		{"uppercase report id", func(r *messages.CleanupReport) { r.ReportID = strings.ToUpper(r.ReportID) }, true},
		{"empty actions", func(r *messages.CleanupReport) { r.Actions = []messages.CleanupAction{} }, true},
		{"hex ids without hyphens", func(r *messages.CleanupReport) {
			r.Actions[0].DispatchAttemptID = strings.ReplaceAll(r.Actions[0].DispatchAttemptID, "-", "")
		}, true},
		{"failed with message", func(r *messages.CleanupReport) {
			r.Actions[0].Outcome = OutcomeFailed
			r.Actions[0].Message = strings.Repeat("m", 1000)
		}, true},
		{"128 actions", func(r *messages.CleanupReport) { r.Actions = repeatAction(r.Actions[0], 128) }, true},

		{"report id not a uuid", func(r *messages.CleanupReport) { r.ReportID = "report-1" }, false},
		{"report id version 0", func(r *messages.CleanupReport) { r.ReportID = "00000000-0000-0000-0000-000000000000" }, false},
		{"unknown source", func(r *messages.CleanupReport) { r.Source = "operator" }, false},
		{"missing actions", func(r *messages.CleanupReport) { r.Actions = nil }, false},
		{"129 actions", func(r *messages.CleanupReport) { r.Actions = repeatAction(r.Actions[0], 129) }, false},
		{"negative remaining", func(r *messages.CleanupReport) { r.Remaining = -1 }, false},
		{"attempt id too short", func(r *messages.CleanupReport) { r.Actions[0].DispatchAttemptID = "abc" }, false},
		{"fencing token not hex", func(r *messages.CleanupReport) { r.Actions[0].FencingToken = strings.Repeat("z", 32) }, false},
		{"instance id missing", func(r *messages.CleanupReport) { r.Actions[0].RunnerInstanceID = "" }, false},
		{"image resource", func(r *messages.CleanupReport) { r.Actions[0].ResourceType = "image" }, false},
		{"empty resource id", func(r *messages.CleanupReport) { r.Actions[0].ResourceID = "" }, false},
		{"long resource id", func(r *messages.CleanupReport) { r.Actions[0].ResourceID = strings.Repeat("a", 256) }, false},
		{"control in resource id", func(r *messages.CleanupReport) { r.Actions[0].ResourceID = "abc\ndef" }, false},
		{"DEL in resource id", func(r *messages.CleanupReport) { r.Actions[0].ResourceID = "abc\x7f" }, false},
		{"unknown outcome", func(r *messages.CleanupReport) { r.Actions[0].Outcome = "skipped" }, false},
		{"long message", func(r *messages.CleanupReport) { r.Actions[0].Message = strings.Repeat("m", 1001) }, false},
		{"no timestamp", func(r *messages.CleanupReport) { r.Actions[0].OccurredAt = time.Time{} }, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := sampleReport()
			c.mutate(&r)
			err := ValidateReport(r)
			if c.ok {
				require.NoError(t, err)
			} else {
				require.True(t, failure.Is(err, CodeReportInvalid), "%v", err)
			}
		})
	}
}

func repeatAction(a messages.CleanupAction, n int) []messages.CleanupAction {
	out := make([]messages.CleanupAction, n)
	for i := range out {
		out[i] = a
	}
	return out
}

func TestPersistPendingAcknowledge(t *testing.T) {
	s := Store{Root: t.TempDir()}

	empty := sampleReport()
	empty.Actions = []messages.CleanupAction{}
	require.NoError(t, s.PersistReport(empty))
	_, err := os.Stat(s.ReportDir())
	require.True(t, os.IsNotExist(err), "a report without actions is not stored")

	r := sampleReport()
	r.Remaining = 1
	require.NoError(t, s.PersistReport(r))
	path := filepath.Join(s.ReportDir(), hexOf(r.ReportID))
	require.Equal(t, os.FileMode(0o600), mode(t, path))
	require.Equal(t, os.FileMode(0o700), mode(t, s.ReportDir()))

	// Persisting the same id again is a no-op: the first version stays.
	again := r
	again.Source = SourceReaper
	require.NoError(t, s.PersistReport(again))

	pending, err := s.PendingReports()
	require.NoError(t, err)
	require.Equal(t, []messages.CleanupReport{r}, pending)

	require.NoError(t, s.AcknowledgeReport(r.ReportID))
	pending, err = s.PendingReports()
	require.NoError(t, err)
	require.Empty(t, pending)
	require.NoError(t, s.AcknowledgeReport(r.ReportID), "acknowledging twice is fine")
	require.True(t, failure.Is(s.AcknowledgeReport("../ledger/x"), CodeReportInvalid))

	bad := sampleReport()
	bad.Source = "nobody"
	require.True(t, failure.Is(s.PersistReport(bad), CodeReportInvalid))
}

func TestPendingReportsSkipsAndKeepsCorrupt(t *testing.T) {
	encode := func(r messages.CleanupReport) []byte {
		data, _ := json.Marshal(r)
		return data
	}
	cases := map[string]func(t *testing.T, s Store) string{
		"not JSON": func(t *testing.T, s Store) string {
			return writeRaw(t, s.ReportDir(), hexOf(uuid()), []byte("[1,2"))
		},
		"invalid action": func(t *testing.T, s Store) string {
			r := sampleReport()
			r.Actions[0].ResourceType = "image"
			return writeRaw(t, s.ReportDir(), hexOf(r.ReportID), encode(r))
		},
		"too many actions": func(t *testing.T, s Store) string {
			r := sampleReport()
			r.Actions = repeatAction(r.Actions[0], 129)
			return writeRaw(t, s.ReportDir(), hexOf(r.ReportID), encode(r))
		},
		"unknown field": func(t *testing.T, s Store) string {
			r := sampleReport()
			data := strings.Replace(string(encode(r)), `"source"`, `"extra":true,"source"`, 1)
			return writeRaw(t, s.ReportDir(), hexOf(r.ReportID), []byte(data))
		},
		"null timestamp": func(t *testing.T, s Store) string {
			r := sampleReport()
			data := strings.Replace(string(encode(r)), `"2030-01-01T00:00:00Z"`, `null`, 1)
			return writeRaw(t, s.ReportDir(), hexOf(r.ReportID), []byte(data))
		},
		"name mismatch": func(t *testing.T, s Store) string {
			return writeRaw(t, s.ReportDir(), hexOf(uuid()), encode(sampleReport()))
		},
		"oversized": func(t *testing.T, s Store) string {
			r := sampleReport()
			data := append(encode(r), []byte(strings.Repeat(" ", MaxReportBytes))...)
			return writeRaw(t, s.ReportDir(), hexOf(r.ReportID), data)
		},
		"symlink": func(t *testing.T, s Store) string {
			other := Store{Root: t.TempDir()}
			r := sampleReport()
			require.NoError(t, other.PersistReport(r))
			require.NoError(t, os.MkdirAll(s.ReportDir(), 0o700))
			link := filepath.Join(s.ReportDir(), hexOf(r.ReportID))
			require.NoError(t, os.Symlink(filepath.Join(other.ReportDir(), hexOf(r.ReportID)), link))
			return link
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			s := Store{Root: t.TempDir()}
			good := sampleReport()
			require.NoError(t, s.PersistReport(good))
			path := plant(t, s)

			pending, err := s.PendingReports()
			require.NoError(t, err)
			require.Equal(t, []messages.CleanupReport{good}, pending)

			_, corrupt, err := s.ScanReports()
			require.NoError(t, err)
			require.Len(t, corrupt, 1)
			require.Equal(t, path, corrupt[0].Path)
			_, err = os.Lstat(path)
			require.NoError(t, err, "a corrupt report is kept for the operator")
		})
	}
}

func TestPendingReportsIsBounded(t *testing.T) {
	s := Store{Root: t.TempDir()}
	for range MaxPendingReports + 10 {
		r := sampleReport()
		data, err := json.Marshal(r)
		require.NoError(t, err)
		writeRaw(t, s.ReportDir(), hexOf(r.ReportID), data)
	}
	pending, err := s.PendingReports()
	require.NoError(t, err)
	require.Len(t, pending, MaxPendingReports)
}
