//go:build !linux

package worker

import (
	"bufio"
	"io"
	"os"

	"github.com/go-git/go-git/v5/plumbing/format/packfile"
)

// unpackInput stores the input bundle's pack through go-git (the worker
// runs on Linux, unpack_linux.go; this serves the package's tests
// elsewhere).
func unpackInput(f *os.File, offset int64, ws *workspace) error {
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return err
	}
	return packfile.UpdateObjectStorage(ws.storage, bufio.NewReader(f))
}
