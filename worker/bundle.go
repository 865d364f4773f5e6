package worker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
	"github.com/go-git/go-git/v5/plumbing/revlist"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// Bounds of a bundle header.
const (
	bundleSignatureV2     = "# v2 git bundle"
	maxBundleHeaderBytes  = 64 << 10
	maxBundleHeaderLines  = 1024
	resultRefPrefix       = "refs/forge/results/"
	inputRefPrefix        = "refs/forge/inputs/"
	resultPackDeltaWindow = 0 // no deltas: bounded memory, trivially self-contained
)

var errBundleHeader = errors.New("invalid bundle header")

// bundleHeader is the parsed text header of a v2 git bundle.
type bundleHeader struct {
	// Prerequisites are the commits the receiver must already have.
	Prerequisites []bundlePrerequisite
	// References are the refs the bundle carries (at least one).
	References []bundleRef
}

// bundlePrerequisite is one "-<sha> [comment]" header line.
type bundlePrerequisite struct {
	Hash    plumbing.Hash
	Comment string
}

// bundleRef is one "<sha> <refname>" header line.
type bundleRef struct {
	Hash plumbing.Hash
	Name plumbing.ReferenceName
}

// parseBundleHeader reads a v2 bundle header from br, up to and including
// the blank line that ends it, leaving br at the start of the packfile. The
// header is bounded to maxBundleHeaderBytes and maxBundleHeaderLines; object
// ids must be full lowercase SHA-1 and reference names valid.
func parseBundleHeader(br *bufio.Reader) (*bundleHeader, error) {
	budget := maxBundleHeaderBytes
	line, err := readHeaderLine(br, &budget)
	if err != nil {
		return nil, err
	}
	if line != bundleSignatureV2 {
		return nil, fmt.Errorf("%w: not a v2 git bundle", errBundleHeader)
	}
	h := &bundleHeader{}
	for n := 0; ; n++ {
		if n >= maxBundleHeaderLines {
			return nil, fmt.Errorf("%w: more than %d lines", errBundleHeader, maxBundleHeaderLines)
		}
		line, err := readHeaderLine(br, &budget)
		if err != nil {
			return nil, err
		}
		if line == "" {
			break
		}
		if line[0] == '-' {
			hash, rest, ok := cutObjectID(line[1:])
			if !ok || (rest != "" && rest[0] != ' ') {
				return nil, fmt.Errorf("%w: malformed prerequisite line", errBundleHeader)
			}
			if rest != "" {
				rest = rest[1:]
			}
			h.Prerequisites = append(h.Prerequisites, bundlePrerequisite{Hash: hash, Comment: rest})
			continue
		}
		hash, rest, ok := cutObjectID(line)
		if !ok || len(rest) < 2 || rest[0] != ' ' {
			return nil, fmt.Errorf("%w: malformed reference line", errBundleHeader)
		}
		name := plumbing.ReferenceName(rest[1:])
		if name == plumbing.HEAD || name.Validate() != nil {
			return nil, fmt.Errorf("%w: invalid reference name", errBundleHeader)
		}
		h.References = append(h.References, bundleRef{Hash: hash, Name: name})
	}
	if len(h.References) == 0 {
		return nil, fmt.Errorf("%w: no references", errBundleHeader)
	}
	return h, nil
}

// readHeaderLine reads one '\n'-terminated line, charging its length to
// budget; the returned line has no terminator.
func readHeaderLine(br *bufio.Reader, budget *int) (string, error) {
	var line []byte
	for {
		b, err := br.ReadByte()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return "", fmt.Errorf("%w: truncated", errBundleHeader)
			}
			return "", err
		}
		*budget--
		if *budget < 0 {
			return "", fmt.Errorf("%w: exceeds %d bytes", errBundleHeader, maxBundleHeaderBytes)
		}
		if b == '\n' {
			return string(line), nil
		}
		if b == 0 || b == '\r' {
			return "", fmt.Errorf("%w: control character in header", errBundleHeader)
		}
		line = append(line, b)
	}
}

// cutObjectID splits a leading 40-character lowercase hex object id from s.
func cutObjectID(s string) (plumbing.Hash, string, bool) {
	if len(s) < 40 || !sha1Hex.MatchString(s[:40]) {
		return plumbing.ZeroHash, "", false
	}
	return plumbing.NewHash(s[:40]), s[40:], true
}

// checkPackSignature verifies that the data after the header starts a
// packfile.
func checkPackSignature(br *bufio.Reader) error {
	sig, err := br.Peek(4)
	if err != nil || !bytes.Equal(sig, []byte("PACK")) {
		return fmt.Errorf("%w: no packfile after the header", errBundleHeader)
	}
	return nil
}

// resultRefName is the reference a result bundle carries for an attempt:
// refs/forge/results/<attempt id without hyphens>.
func resultRefName(attemptID string) plumbing.ReferenceName {
	return plumbing.ReferenceName(resultRefPrefix + attemptHex(attemptID))
}

// attemptHex is the attempt id without hyphens, lowercase.
func attemptHex(attemptID string) string {
	return string(bytes.ToLower(bytes.ReplaceAll([]byte(attemptID), []byte("-"), nil)))
}

// resultObjects lists the objects of the result commit that the input
// commit's tree does not already hold: the result commit itself plus the
// trees and blobs of its tree minus those of the input tree. The result
// commit's only parent is the input commit, so this is exactly what a
// receiver holding the input commit lacks, up to objects that only the
// input's history (not its tree) contains; those are sent again, which git
// accepts. Walking only the two trees keeps time and memory bounded by the
// tree size rather than the whole history.
func resultObjects(s storer.EncodedObjectStorer, inputTree, resultCommit, resultTree plumbing.Hash) ([]plumbing.Hash, error) {
	objs, err := revlist.Objects(s, []plumbing.Hash{resultTree}, []plumbing.Hash{inputTree})
	if err != nil {
		return nil, err
	}
	return append(objs, resultCommit), nil
}

// writeResultBundle writes a v2 bundle to w: prerequisite input, one ref
// (resultRef at result), then a packfile of objs.
func writeResultBundle(w io.Writer, s storer.EncodedObjectStorer, input, result plumbing.Hash,
	resultRef plumbing.ReferenceName, objs []plumbing.Hash) error {
	header := fmt.Sprintf("%s\n-%s \n%s %s\n\n", bundleSignatureV2, input, result, resultRef)
	if _, err := io.WriteString(w, header); err != nil {
		return err
	}
	_, err := packfile.NewEncoder(w, s, false).Encode(objs, resultPackDeltaWindow)
	return err
}
