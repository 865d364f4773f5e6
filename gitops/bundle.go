package gitops

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/forgedev/forged/failure"
)

// Bounds of a result bundle's text header.
const (
	bundleSignatureV2    = "# v2 git bundle"
	maxBundleHeaderBytes = 64 << 10
	maxBundleHeaderLines = 1024
)

// BundleHeader is the parsed text header of a v2 git bundle.
type BundleHeader struct {
	// Prerequisites are the commits the bundle's pack assumes the
	// receiver has.
	Prerequisites []string
	// Heads are the bundle's references, "<id> <name>" split.
	Heads []BundleHead
	// PackOffset is where the packfile starts, right after the header.
	PackOffset int64
}

// BundleHead is one reference a bundle carries.
type BundleHead struct {
	ID, Name string
}

// ParseBundleHeader reads the header of a v2 git bundle from r, up to and
// including the blank line that ends it. It is bounded (64 KiB, 1024
// lines); object ids must be full lowercase SHA-1 ids; there must be at
// least one head. v3 bundles (capabilities, other hash functions, filters)
// are refused: forged's worker writes v2. Violations are
// failure.SandboxOutputInvalid.
func ParseBundleHeader(r io.Reader) (*BundleHeader, error) {
	invalid := func(format string, args ...any) (*BundleHeader, error) {
		return nil, failure.New(failure.SandboxOutputInvalid, "result bundle header: "+format, args...)
	}
	br := bufio.NewReaderSize(io.LimitReader(r, maxBundleHeaderBytes+1), 4096)
	var consumed int64
	readLine := func() (string, error) {
		line, err := br.ReadString('\n')
		consumed += int64(len(line))
		if err != nil {
			if errors.Is(err, io.EOF) {
				if consumed > maxBundleHeaderBytes {
					return "", fmt.Errorf("exceeds %d bytes", maxBundleHeaderBytes)
				}
				return "", errors.New("truncated")
			}
			return "", err
		}
		line = strings.TrimSuffix(line, "\n")
		if strings.ContainsAny(line, "\x00\r") {
			return "", errors.New("control character")
		}
		return line, nil
	}
	sig, err := readLine()
	if err != nil {
		return invalid("%v", err)
	}
	if sig != bundleSignatureV2 {
		return invalid("not a v2 git bundle")
	}
	h := &BundleHeader{}
	for n := 0; ; n++ {
		if n >= maxBundleHeaderLines {
			return invalid("more than %d lines", maxBundleHeaderLines)
		}
		line, err := readLine()
		if err != nil {
			return invalid("%v", err)
		}
		if line == "" {
			break
		}
		if rest, ok := strings.CutPrefix(line, "-"); ok {
			id, _, _ := strings.Cut(rest, " ")
			if len(id) != 40 || !isLowerHex(id) {
				return invalid("malformed prerequisite line")
			}
			h.Prerequisites = append(h.Prerequisites, id)
			continue
		}
		id, name, ok := strings.Cut(line, " ")
		if !ok || len(id) != 40 || !isLowerHex(id) || name == "" {
			return invalid("malformed reference line")
		}
		h.Heads = append(h.Heads, BundleHead{ID: id, Name: name})
	}
	if len(h.Heads) == 0 {
		return invalid("no references")
	}
	h.PackOffset = consumed
	return h, nil
}

// headFor returns the name of the first head that points at sha and has a
// name forged can use, "" when there is none.
func (h *BundleHeader) headFor(sha string) string {
	for _, head := range h.Heads {
		if head.ID == sha && bundleRefName.MatchString(head.Name) &&
			!strings.Contains(head.Name, "..") && !strings.Contains(head.Name, "//") && !strings.HasSuffix(head.Name, "/") {
			return head.Name
		}
	}
	return ""
}
