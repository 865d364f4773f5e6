package ledger

import (
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestWriteReadRoundTrip(t *testing.T) {
	s := Store{Root: t.TempDir()}
	e := sampleEntry()
	before := time.Now()
	require.NoError(t, s.Write(e))

	got, err := s.Read(e.AttemptID)
	require.NoError(t, err)
	require.False(t, got.UpdatedAt.Before(before.Truncate(time.Second)), "UpdatedAt is stamped on write")
	e.SchemaVersion = SchemaVersion
	e.UpdatedAt = got.UpdatedAt
	require.Equal(t, e, got)

	listed, corrupt, err := s.List()
	require.NoError(t, err)
	require.Empty(t, corrupt)
	require.Equal(t, []Entry{got}, listed)

	// A rewrite replaces the ledger.
	next, err := got.Transition(Releasing)
	require.NoError(t, err)
	next.Created = nil
	require.NoError(t, s.Write(next))
	got, err = s.Read(e.AttemptID)
	require.NoError(t, err)
	require.Equal(t, Releasing, got.State)
	require.Equal(t, []Resource{}, got.Created, "nil lists are stored as empty lists")
}

func TestWritePermissionsAndNoTemporaryLeft(t *testing.T) {
	root := t.TempDir()
	s := Store{Root: root}
	e := sampleEntry()
	require.NoError(t, s.Write(e))
	require.Equal(t, os.FileMode(0o700), mode(t, s.LedgerDir()))
	require.Equal(t, os.FileMode(0o600), mode(t, filepath.Join(s.LedgerDir(), hexOf(e.AttemptID))))

	names, err := os.ReadDir(s.LedgerDir())
	require.NoError(t, err)
	require.Len(t, names, 1, "the temporary file was renamed, not left behind")

	// A pre-existing, looser directory is tightened.
	require.NoError(t, os.Chmod(s.LedgerDir(), 0o755))
	require.NoError(t, s.Write(sampleEntry()))
	require.Equal(t, os.FileMode(0o700), mode(t, s.LedgerDir()))
}

func TestWriteRefusesSymlinkedDirectory(t *testing.T) {
	root := t.TempDir()
	elsewhere := t.TempDir()
	require.NoError(t, os.Symlink(elsewhere, filepath.Join(root, ledgerDir)))
	s := Store{Root: root}
	err := s.Write(sampleEntry())
	require.True(t, failure.Is(err, CodeStateIO), "%v", err)
	_, _, err = s.List()
	require.True(t, failure.Is(err, CodeStateIO), "%v", err)
	left, err := os.ReadDir(elsewhere)
	require.NoError(t, err)
	require.Empty(t, left)
}

func TestWriteRefusesInvalidEntries(t *testing.T) {
	cases := map[string]func(e *Entry){
		"short attempt id":       func(e *Entry) { e.AttemptID = "1234" },
		"uppercase runner id":    func(e *Entry) { e.RunnerID = strings.ToUpper(e.RunnerID) },
		"empty fencing token":    func(e *Entry) { e.FencingToken = "" },
		"bad instance id":        func(e *Entry) { e.RunnerInstanceID = "not-a-uuid" },
		"bad lease id":           func(e *Entry) { e.ExecutionLeaseID += "0" },
		"empty worktree key":     func(e *Entry) { e.WorktreeKey = "" },
		"control in worktree":    func(e *Entry) { e.WorktreeKey = "a\nb" },
		"no expiry":              func(e *Entry) { e.ExpiresAt = time.Time{} },
		"unknown state":          func(e *Entry) { e.State = "paused" },
		"future schema":          func(e *Entry) { e.SchemaVersion = 2 },
		"unknown resource":       func(e *Entry) { e.Planned[0].Type = "image" },
		"unnamed resource":       func(e *Entry) { e.Created[0].Name = "" },
		"control in id":          func(e *Entry) { e.Created[0].ID = "abc\x00" },
		"long role":              func(e *Entry) { e.Planned[0].Role = strings.Repeat("r", 65) },
		"too many resources":     func(e *Entry) { e.Planned = make([]Resource, 65) },
		"negative sample data":   func(e *Entry) { e.PeakMemory.FailedSampleCount = -1 },
		"no successful sample":   func(e *Entry) { e.PeakMemory.SampleCount = 0 },
		"unknown memory source":  func(e *Entry) { e.PeakMemory.Source = "guess" },
		"container id not hex":   func(e *Entry) { e.PeakMemory.Containers[0].ContainerID = "../../etc" },
		"role with control char": func(e *Entry) { e.PeakMemory.Containers[0].Role = "agent\n" },
		"unknown isolation":      func(e *Entry) { e.Isolation = "kata" },
		"long worker runtime":    func(e *Entry) { e.WorkerRuntime = strings.Repeat("r", 65) },
		"control in runtime":     func(e *Entry) { e.WorkerRuntime = "runsc\n" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			s := Store{Root: t.TempDir()}
			e := sampleEntry()
			mutate(&e)
			err := s.Write(e)
			require.True(t, failure.Is(err, CodeLedgerInvalid), "%v", err)
			_, statErr := os.Stat(s.LedgerDir())
			if statErr == nil {
				names, _ := os.ReadDir(s.LedgerDir())
				require.Empty(t, names)
			}
		})
	}
}

func TestReadMissingAndRemove(t *testing.T) {
	s := Store{Root: t.TempDir()}
	_, err := s.Read(uuid())
	require.True(t, errors.Is(err, fs.ErrNotExist), "%v", err)
	_, err = s.Read("../../etc/passwd")
	require.True(t, failure.Is(err, CodeLedgerInvalid))

	e := sampleEntry()
	require.NoError(t, s.Write(e))
	require.NoError(t, s.Remove(e.AttemptID))
	_, err = s.Read(e.AttemptID)
	require.True(t, errors.Is(err, fs.ErrNotExist))
	require.NoError(t, s.Remove(e.AttemptID), "removing a missing ledger is not an error")
	require.Error(t, s.Remove("x"))

	entries, corrupt, err := Store{Root: filepath.Join(t.TempDir(), "absent")}.List()
	require.NoError(t, err)
	require.Empty(t, entries)
	require.Empty(t, corrupt)
}

// corruptLedger puts one untrustworthy file in the ledger directory and
// returns its path.
type corruptLedger func(t *testing.T, s Store) string

func TestListKeepsAndReportsCorruptLedgers(t *testing.T) {
	valid := func(mutate func(m map[string]any)) []byte {
		e := sampleEntry()
		e.SchemaVersion = SchemaVersion
		raw, _ := json.Marshal(e)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		mutate(m)
		out, _ := json.Marshal(m)
		return out
	}
	named := func(data []byte) corruptLedger {
		return func(t *testing.T, s Store) string {
			var m struct{ AttemptID string }
			_ = json.Unmarshal(data, &m)
			name := uuid()
			if m.AttemptID != "" {
				name = m.AttemptID
			}
			return writeRaw(t, s.LedgerDir(), hexOf(name), data)
		}
	}
	cases := map[string]corruptLedger{
		"not JSON":         named([]byte("{\"schemaVersion\": 1,")),
		"trailing data":    named(append(valid(func(map[string]any) {}), []byte(" {}")...)),
		"unknown field":    named(valid(func(m map[string]any) { m["volumesByRole"] = map[string]string{} })),
		"unknown state":    named(valid(func(m map[string]any) { m["state"] = "paused" })),
		"legacy schema":    named(valid(func(m map[string]any) { m["schemaVersion"] = 2 })),
		"short uuid":       named(valid(func(m map[string]any) { m["fencingToken"] = "2d2f7c9e" })),
		"missing expiry":   named(valid(func(m map[string]any) { delete(m, "expiresAt") })),
		"wrong state type": named(valid(func(m map[string]any) { m["state"] = 3 })),
		"oversized": func(t *testing.T, s Store) string {
			data := valid(func(m map[string]any) { m["worktreeKey"] = "k" })
			data = append(data, []byte(strings.Repeat(" ", MaxLedgerBytes))...)
			return writeRaw(t, s.LedgerDir(), hexOf(uuid()), data)
		},
		"name mismatch": func(t *testing.T, s Store) string {
			return writeRaw(t, s.LedgerDir(), hexOf(uuid()), valid(func(map[string]any) {}))
		},
		"symlink to a valid ledger": func(t *testing.T, s Store) string {
			other := Store{Root: t.TempDir()}
			e := sampleEntry()
			require.NoError(t, other.Write(e))
			require.NoError(t, os.MkdirAll(s.LedgerDir(), 0o700))
			link := filepath.Join(s.LedgerDir(), hexOf(e.AttemptID))
			require.NoError(t, os.Symlink(filepath.Join(other.LedgerDir(), hexOf(e.AttemptID)), link))
			return link
		},
		"directory": func(t *testing.T, s Store) string {
			dir := filepath.Join(s.LedgerDir(), hexOf(uuid()))
			require.NoError(t, os.MkdirAll(dir, 0o700))
			return dir
		},
		"unexpected name": func(t *testing.T, s Store) string {
			return writeRaw(t, s.LedgerDir(), strings.ToUpper(hexOf(uuid())), valid(func(map[string]any) {}))
		},
	}
	for name, plant := range cases {
		t.Run(name, func(t *testing.T) {
			s := Store{Root: t.TempDir()}
			good := sampleEntry()
			require.NoError(t, s.Write(good))
			path := plant(t, s)

			entries, corrupt, err := s.List()
			require.NoError(t, err)
			require.Len(t, entries, 1, "only the valid ledger is trusted")
			require.Equal(t, good.AttemptID, entries[0].AttemptID)
			require.Len(t, corrupt, 1)
			require.Equal(t, path, corrupt[0].Path)
			require.NotEmpty(t, corrupt[0].Reason)
			_, err = os.Lstat(path)
			require.NoError(t, err, "a corrupt ledger is kept for the operator")

			if base := filepath.Base(path); recordName.MatchString(base) {
				id := hexToUUID(strings.TrimSuffix(base, ".json"))
				_, err := s.Read(id)
				require.True(t, failure.Is(err, CodeLedgerInvalid), "Read refuses it too: %v", err)
			}
		})
	}
}

// hexToUUID re-inserts the hyphens of a 32-digit hex id.
func hexToUUID(h string) string {
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

func TestListIgnoresTemporaryFiles(t *testing.T) {
	s := Store{Root: t.TempDir()}
	writeRaw(t, s.LedgerDir(), "."+hexOf(uuid())+".0011223344556677.tmp", []byte("{"))
	entries, corrupt, err := s.List()
	require.NoError(t, err)
	require.Empty(t, entries)
	require.Empty(t, corrupt)
}

func TestRemoveTemporaryFilesLeftByACrash(t *testing.T) {
	s := Store{Root: t.TempDir()}
	e := sampleEntry()
	require.NoError(t, s.Write(e))
	stale := filepath.Join(s.LedgerDir(), ".tmp-"+strings.ReplaceAll(e.AttemptID, "-", "")+".json123456789")
	require.NoError(t, os.WriteFile(stale, []byte("{half"), 0o600))
	legacy := filepath.Join(s.LedgerDir(), "."+strings.ReplaceAll(e.AttemptID, "-", "")+".json.0123456789abcdef.tmp")
	require.NoError(t, os.WriteFile(legacy, []byte("{half"), 0o600))
	n, err := s.RemoveTemporaryFiles()
	require.NoError(t, err)
	require.Equal(t, 2, n)
	require.NoFileExists(t, stale)
	require.NoFileExists(t, legacy)
	entries, corrupt, err := s.List()
	require.NoError(t, err)
	require.Empty(t, corrupt)
	require.Len(t, entries, 1, "real ledgers are kept")
}
