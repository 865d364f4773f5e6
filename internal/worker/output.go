package worker

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/atomicfile"
	"github.com/forgedev/forged/messages"
)

// outputFileMode is the mode of the files written into the output
// directory; the host copies them out through the Docker API.
const outputFileMode = 0o600

// clearOutputs creates the output directory when missing and removes
// output files left there (by an earlier run or by anything else), so that
// a manifest exists only when this run wrote it.
func clearOutputs(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return failure.Wrap(failure.SandboxWorkerFailed, err, "create output directory")
	}
	for _, name := range []string{messages.ManifestFile, messages.ResultFile, messages.ResultBundleFile} {
		if err := os.Remove(filepath.Join(dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return failure.Wrap(failure.SandboxWorkerFailed, err, "remove stale %s", name)
		}
	}
	return nil
}

// writeOutputs writes the result bundle (when there is a result commit),
// result.json and, last, manifest.json, after removing whatever the task
// may have planted under those names.
func writeOutputs(dir string, ws *workspace, id messages.SandboxIdentity, result *result, res messages.ResultPacket) error {
	if err := clearOutputs(dir); err != nil {
		return err
	}
	var bundle *messages.OutputFile
	if !result.commit.IsZero() {
		f, err := ws.writeBundle(dir, id.DispatchAttemptID, result)
		if err != nil {
			return failure.Wrap(failure.SandboxWorkerFailed, err, "write %s", messages.ResultBundleFile)
		}
		bundle = &f
	}
	resFile, err := writeJSONFile(dir, messages.ResultFile, res)
	if err != nil {
		return failure.Wrap(failure.SandboxWorkerFailed, err, "write %s", messages.ResultFile)
	}
	manifest := messages.Manifest{
		SandboxIdentity: id,
		ResultCommitSHA: res.ResultCommitSHA,
		Bundle:          bundle,
		Result:          resFile,
	}
	if _, err := writeJSONFile(dir, messages.ManifestFile, manifest); err != nil {
		return failure.Wrap(failure.SandboxWorkerFailed, err, "write %s", messages.ManifestFile)
	}
	return nil
}

// writeBundle writes the result bundle of r into dir.
func (ws *workspace) writeBundle(dir, attemptID string, r *result) (messages.OutputFile, error) {
	return writeFileAtomic(dir, messages.ResultBundleFile, func(w io.Writer) error {
		return writeResultBundle(w, ws.storage, r.prerequisites, r.commit, resultRefName(attemptID), r.objects)
	})
}

// writeJSONFile writes v as one JSON document and a newline.
func writeJSONFile(dir, name string, v any) (messages.OutputFile, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return messages.OutputFile{}, err
	}
	return writeFileAtomic(dir, name, func(w io.Writer) error {
		_, err := w.Write(append(raw, '\n'))
		return err
	})
}

// writeFileAtomic writes dir/name atomically (forged's one atomic writer)
// and returns the file's size and sha256.
func writeFileAtomic(dir, name string, fill func(io.Writer) error) (messages.OutputFile, error) {
	sum := sha256.New()
	counter := &countingWriter{}
	err := atomicfile.WriteFunc(filepath.Join(dir, name), outputFileMode, func(f io.Writer) error {
		bw := bufio.NewWriterSize(io.MultiWriter(f, sum, counter), 64<<10)
		if err := fill(bw); err != nil {
			return err
		}
		return bw.Flush()
	})
	if err != nil {
		return messages.OutputFile{}, err
	}
	return messages.OutputFile{Path: name, Bytes: counter.n, SHA256: hex.EncodeToString(sum.Sum(nil))}, nil
}

// countingWriter counts the bytes written through it.
type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}
