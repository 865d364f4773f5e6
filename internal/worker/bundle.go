package worker

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/format/packfile"
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

// writeResultBundle writes a v2 bundle to w: the prerequisites, one ref
// (resultRef at result), then a self-contained packfile of objs without
// deltas (so the host can measure it from its entry headers and needs
// nothing outside it to index it).
func writeResultBundle(w io.Writer, s storer.EncodedObjectStorer, prerequisites []plumbing.Hash, result plumbing.Hash,
	resultRef plumbing.ReferenceName, objs []plumbing.Hash) error {
	var header strings.Builder
	header.WriteString(bundleSignatureV2 + "\n")
	for _, p := range prerequisites {
		fmt.Fprintf(&header, "-%s \n", p)
	}
	fmt.Fprintf(&header, "%s %s\n\n", result, resultRef)
	if _, err := io.WriteString(w, header.String()); err != nil {
		return err
	}
	_, err := packfile.NewEncoder(w, s, false).Encode(objs, resultPackDeltaWindow)
	return err
}
