package runner

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/forgedev/forged/internal/kit/atomicfile"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/messages"
)

// runnerIDFile holds the runner's id inside the state root.
const runnerIDFile = "runner-id"

// LoadRunnerID returns the runner id kept in stateRoot, creating a new
// random one on first use. Every resource forged labels carries it, and the
// reaper only ever removes resources of this id.
func LoadRunnerID(stateRoot string) (string, error) {
	if err := os.MkdirAll(stateRoot, 0o700); err != nil {
		return "", fmt.Errorf("runner id: %w", err)
	}
	path := filepath.Join(stateRoot, runnerIDFile)
	raw, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(raw))
		if !messages.IsFullUUID(id) {
			return "", fmt.Errorf("runner id: %s does not hold a full UUID", path)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("runner id: %w", err)
	}
	// The id appears whole or not at all: a start that fails or crashes
	// while writing it leaves no torn file for the next start to refuse,
	// and a start racing this one never reads it half written. Of two
	// first starts, one creates the file and the other reads it.
	id := ids.NewUUID()
	err = atomicfile.Create(path, []byte(id+"\n"), 0o600)
	if errors.Is(err, fs.ErrExist) {
		return LoadRunnerID(stateRoot) // created concurrently
	}
	if err != nil {
		return "", fmt.Errorf("runner id: %w", err)
	}
	return id, nil
}
