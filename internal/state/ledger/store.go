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
	"sort"
	"strings"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/strictjson"
	"github.com/forgedev/forged/messages"
)

// MaxLedgerBytes bounds one ledger file.
const MaxLedgerBytes = 64 * 1024

// Directory names under the state root.
const (
	ledgerDir = "ledger"
	reportDir = "cleanup-reports"
)

// recordName is the name of a ledger or report file: 32 lowercase hex
// digits (the UUID without hyphens) and ".json".
var recordName = regexp.MustCompile(`^[0-9a-f]{32}\.json$`)

// Store keeps ledgers and cleanup reports under Root, forged's state root.
// Its methods are safe to call from several goroutines for different
// attempts; writes of the same attempt must be serialised by the caller
// (its attempt actor).
type Store struct {
	// Root is the state root (for example ~/.cache/forged).
	Root string
}

// Corrupt is a file that failed a check. It stays on disk for the
// operator; its content is never used.
type Corrupt struct {
	Path   string `json:"path"`
	Reason string `json:"reason"`
}

// LedgerDir is the directory of the ledgers.
func (s Store) LedgerDir() string { return filepath.Join(s.Root, ledgerDir) }

// ReportDir is the directory of the pending cleanup reports.
func (s Store) ReportDir() string { return filepath.Join(s.Root, reportDir) }

// Write durably stores e as its attempt's ledger, replacing any previous
// one. A zero SchemaVersion is set to SchemaVersion and UpdatedAt is set
// to the current time; nil resource lists are stored as empty lists. An
// entry failing Validate is refused with CodeLedgerInvalid.
func (s Store) Write(e Entry) error {
	if e.SchemaVersion == 0 {
		e.SchemaVersion = SchemaVersion
	}
	if e.Planned == nil {
		e.Planned = []Resource{}
	}
	if e.Created == nil {
		e.Created = []Resource{}
	}
	e.UpdatedAt = time.Now().UTC()
	if err := e.Validate(); err != nil {
		return err
	}
	data, err := json.Marshal(e)
	if err != nil {
		return failure.Wrap(CodeLedgerInvalid, err, "encode ledger")
	}
	if len(data)+1 > MaxLedgerBytes {
		return invalid("ledger of attempt %s would be %d bytes, more than %d", e.AttemptID, len(data)+1, MaxLedgerBytes)
	}
	return writeDurable(s.LedgerDir(), fileName(e.AttemptID), append(data, '\n'))
}

// Read returns the ledger of attemptID. A missing ledger is an error
// satisfying errors.Is(err, fs.ErrNotExist); a ledger failing any check is
// CodeLedgerInvalid (and is left on disk).
func (s Store) Read(attemptID string) (Entry, error) {
	if !messages.IsFullUUID(attemptID) {
		return Entry{}, invalid("attempt id %q is not a full lowercase UUID", text.Ellipsis(attemptID, 64))
	}
	path := filepath.Join(s.LedgerDir(), fileName(attemptID))
	e, reason, err := readLedger(path)
	if err != nil {
		return Entry{}, err
	}
	if reason != "" {
		return Entry{}, invalid("ledger %s: %s", path, reason)
	}
	return e, nil
}

// List returns every valid ledger, sorted by attempt id, and every corrupt
// one. A missing ledger directory is an empty list. Files whose names
// start with a dot (temporary files of an interrupted write) are ignored;
// any other unexpected name is reported as corrupt.
func (s Store) List() ([]Entry, []Corrupt, error) {
	return scanRecords(s.LedgerDir(), 0, readLedger)
}

// scanRecords reads the record files of dir in name order with read, at
// most limit of them (0: all). Files named otherwise are corrupt, files
// removed while listing are skipped, and files read gives a reason for
// are corrupt, kept on disk and never trusted.
func scanRecords[T any](dir string, limit int, read func(path string) (T, string, error)) ([]T, []Corrupt, error) {
	names, err := readDirNames(dir)
	if err != nil {
		return nil, nil, err
	}
	var records []T
	var corrupt []Corrupt
	count := 0
	for _, name := range names {
		path := filepath.Join(dir, name)
		if !recordName.MatchString(name) {
			corrupt = append(corrupt, Corrupt{Path: path, Reason: "unexpected file name"})
			continue
		}
		if limit > 0 && count == limit {
			break
		}
		count++
		r, reason, err := read(path)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue // removed while listing
		case err != nil:
			return nil, nil, err
		case reason != "":
			corrupt = append(corrupt, Corrupt{Path: path, Reason: reason})
		default:
			records = append(records, r)
		}
	}
	return records, corrupt, nil
}

// Remove deletes the ledger of attemptID durably; a missing ledger is not
// an error.
func (s Store) Remove(attemptID string) error {
	if !messages.IsFullUUID(attemptID) {
		return invalid("attempt id %q is not a full lowercase UUID", text.Ellipsis(attemptID, 64))
	}
	return removeDurable(s.LedgerDir(), fileName(attemptID))
}

// readLedger reads and validates one ledger file. A non-empty reason says
// why the file cannot be trusted (an unreadable file included); err is set
// only when the file is missing.
func readLedger(path string) (e Entry, reason string, err error) {
	data, err := readBounded(path, MaxLedgerBytes)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return Entry{}, "", err
	case errors.Is(err, errTooLarge):
		return Entry{}, fmt.Sprintf("larger than %d bytes", MaxLedgerBytes), nil
	case err != nil:
		return Entry{}, err.Error(), nil
	}
	if err := strictjson.Decode(data, &e); err != nil {
		return Entry{}, "undecodable: " + err.Error(), nil
	}
	if err := e.Validate(); err != nil {
		return Entry{}, err.Error(), nil
	}
	if filepath.Base(path) != fileName(e.AttemptID) {
		return Entry{}, "file name does not match its attempt id", nil
	}
	return e, "", nil
}

// readDirNames lists the names in dir, sorted, skipping dot files. A
// missing directory has no names; a directory that is a symbolic link is
// refused.
func readDirNames(dir string) ([]string, error) {
	info, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, ioError(err, "inspect %s", dir)
	}
	if !info.IsDir() {
		return nil, failure.New(CodeStateIO, "%s is not a directory (a symbolic link is refused)", dir)
	}
	list, err := os.ReadDir(dir)
	if err != nil {
		return nil, ioError(err, "list %s", dir)
	}
	names := make([]string, 0, len(list))
	for _, entry := range list {
		if !strings.HasPrefix(entry.Name(), ".") {
			names = append(names, entry.Name())
		}
	}
	sort.Strings(names)
	return names, nil
}

// fileName is the record file name of a full UUID.
func fileName(id string) string {
	return strings.ReplaceAll(strings.ToLower(id), "-", "") + ".json"
}
