package reaper

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/state/ledger"
)

// workDir creates STATE_ROOT/<root>/<hex> with a file in it, as an attempt
// (or its quarantine) leaves it.
func (w *world) workDir(root, attemptID string) string {
	w.t.Helper()
	dir := filepath.Join(w.store.Root, root, strings.ReplaceAll(attemptID, "-", ""))
	require.NoError(w.t, os.MkdirAll(filepath.Join(dir, "output"), 0o700))
	require.NoError(w.t, os.WriteFile(filepath.Join(dir, "output", "result.bundle"), []byte("x"), 0o600))
	return dir
}

func TestReaperRemovesTheWorkDirsNothingOwns(t *testing.T) {
	w := newWorld(t)
	reaped := w.dead() // its ledger is reaped this round: its directories go with it
	require.NoError(t, w.store.Write(reaped.entry(ledger.Active)))
	reapedDirs := []string{w.workDir("attempts", reaped.owner.AttemptID), w.workDir("quarantine", reaped.owner.AttemptID)}
	orphan := w.dead() // died while preparing: no ledger yet
	orphanDir := w.workDir("attempts", orphan.owner.AttemptID)
	running := w.mine() // this process runs it
	runningDir := w.workDir("attempts", running.owner.AttemptID)
	kept := newAttempt(w.runner, w.instance, w.now.Add(time.Hour)) // a current lease of this instance, not live: kept
	require.NoError(t, w.store.Write(kept.entry(ledger.Active)))
	keptDir := w.workDir("attempts", kept.owner.AttemptID)
	stranger := filepath.Join(w.store.Root, "attempts", "not-an-attempt")
	require.NoError(t, os.MkdirAll(stranger, 0o700))

	cfg := w.config()
	cfg.Live = func(id string) bool { return id == running.owner.AttemptID }

	dry := cfg
	dry.DryRun = true
	round := w.run(dry)
	assert.ElementsMatch(t, append(reapedDirs, orphanDir), round.WouldRemoveDirs,
		"a dry run lists the orphans and the directories of the ledgers it would reap")
	assert.DirExists(t, orphanDir, "a dry run removes nothing")

	round = w.run(cfg)
	assert.ElementsMatch(t, append(reapedDirs, orphanDir), round.RemovedDirs)
	for _, dir := range append(reapedDirs, orphanDir) {
		assert.NoDirExists(t, dir)
	}
	assert.DirExists(t, runningDir, "a running attempt's directory is never touched")
	assert.DirExists(t, keptDir, "a kept ledger keeps its directory")
	assert.DirExists(t, stranger, "only attempt-named directories are considered")
}

func TestReaperRemovesASymlinkedWorkDirAsALink(t *testing.T) {
	w := newWorld(t)
	target := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(target, "precious"), []byte("x"), 0o600))
	a := w.dead()
	require.NoError(t, os.MkdirAll(filepath.Join(w.store.Root, "attempts"), 0o700))
	link := filepath.Join(w.store.Root, "attempts", strings.ReplaceAll(a.owner.AttemptID, "-", ""))
	require.NoError(t, os.Symlink(target, link))
	round := w.run(w.config())
	assert.Equal(t, []string{link}, round.RemovedDirs)
	assert.FileExists(t, filepath.Join(target, "precious"), "the link's target is never followed")
}
