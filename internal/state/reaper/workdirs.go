package reaper

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"github.com/forgedev/forged/internal/kit/ids"
)

// Per-attempt directories of the state root: the attempt's private copies
// (input bundle, build context, copied-out output of up to 600 MiB) and
// its quarantine repository. They are named by the attempt id without
// dashes.
var attemptDirRoots = []string{"attempts", "quarantine"}

// workDirs is the round's last phase: it removes the state root's
// per-attempt directories that nothing owns any more, the attempt neither
// running in this process nor holding a ledger (the ledger phase has just
// removed those it reaped). That covers attempts reaped this round,
// attempts that finished with a degraded teardown and were reaped later,
// and attempts that died before their first ledger write (while preparing
// their input). Only directories named like an attempt are considered; a
// symbolic link is removed as a link, never followed. A dry run lists them,
// with those of the ledgers it would reap.
func (s *sweep) workDirs() error {
	var errs []error
	for _, root := range attemptDirRoots {
		dir := filepath.Join(s.store.Root, root)
		entries, err := os.ReadDir(dir)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("list %s: %w", dir, err))
			continue
		}
		for _, entry := range entries {
			id, ok := ids.UUIDFromHex(entry.Name())
			if !ok {
				continue
			}
			if s.live(id) || s.kept[id] || (s.hasLedger(entry.Name()) && !(s.cfg.DryRun && slices.Contains(s.round.WouldReap, id))) {
				continue
			}
			path := filepath.Join(dir, entry.Name())
			if s.cfg.DryRun {
				s.round.WouldRemoveDirs = append(s.round.WouldRemoveDirs, path)
				continue
			}
			if err := os.RemoveAll(path); err != nil {
				errs = append(errs, fmt.Errorf("remove %s: %w", path, err))
				continue
			}
			s.round.RemovedDirs = append(s.round.RemovedDirs, path)
		}
	}
	return errors.Join(errs...)
}

// hasLedger reports whether a ledger file (valid or corrupt: a corrupt one
// is left for the operator, and so is its directory) names the attempt.
func (s *sweep) hasLedger(hex string) bool {
	_, err := os.Lstat(filepath.Join(s.store.LedgerDir(), hex+".json"))
	return err == nil
}
