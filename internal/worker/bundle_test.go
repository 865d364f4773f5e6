package worker

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const (
	shaA = "1111111111111111111111111111111111111111"
	shaB = "2222222222222222222222222222222222222222"
)

func TestParseBundleHeader(t *testing.T) {
	t.Run("refs and prerequisites", func(t *testing.T) {
		in := "# v2 git bundle\n" +
			"-" + shaA + " some commit subject\n" +
			"-" + shaB + "\n" +
			shaB + " refs/forge/inputs/abc\n" +
			shaA + " refs/heads/main\n" +
			"\nPACK rest"
		br := bufio.NewReader(strings.NewReader(in))
		h, err := parseBundleHeader(br)
		require.NoError(t, err)
		assert.Equal(t, []bundlePrerequisite{
			{Hash: plumbing.NewHash(shaA), Comment: "some commit subject"},
			{Hash: plumbing.NewHash(shaB)},
		}, h.Prerequisites)
		assert.Equal(t, []bundleRef{
			{Hash: plumbing.NewHash(shaB), Name: "refs/forge/inputs/abc"},
			{Hash: plumbing.NewHash(shaA), Name: "refs/heads/main"},
		}, h.References)
		require.NoError(t, checkPackSignature(br))
		rest, err := io.ReadAll(br)
		require.NoError(t, err)
		assert.Equal(t, "PACK rest", string(rest), "the reader is left at the packfile")
	})
	t.Run("prerequisite with empty comment", func(t *testing.T) {
		h, err := parseBundleHeader(bufio.NewReader(strings.NewReader(
			"# v2 git bundle\n-" + shaA + " \n" + shaB + " refs/forge/results/x\n\n")))
		require.NoError(t, err)
		assert.Equal(t, "", h.Prerequisites[0].Comment)
	})

	invalid := map[string]string{
		"empty":                 "",
		"v3 bundle":             "# v3 git bundle\n@object-format=sha1\n" + shaA + " refs/heads/x\n\n",
		"wrong signature":       "# v2 git bundlex\n" + shaA + " refs/heads/x\n\n",
		"no refs":               "# v2 git bundle\n\n",
		"only prerequisites":    "# v2 git bundle\n-" + shaA + "\n\n",
		"unterminated":          "# v2 git bundle\n" + shaA + " refs/heads/x\n",
		"no newline at all":     "# v2 git bundle",
		"short sha":             "# v2 git bundle\n" + shaA[:39] + " refs/heads/x\n\n",
		"uppercase sha":         "# v2 git bundle\n" + strings.ToUpper("abcdef"+shaA[6:]) + " refs/heads/x\n\n",
		"sha256 length":         "# v2 git bundle\n" + shaA + shaA[:24] + " refs/heads/x\n\n",
		"ref without name":      "# v2 git bundle\n" + shaA + "\n\n",
		"ref without space":     "# v2 git bundle\n" + shaA + "refs/heads/x\n\n",
		"ref empty name":        "# v2 git bundle\n" + shaA + " \n\n",
		"ref bad name":          "# v2 git bundle\n" + shaA + " refs/heads/a..b\n\n",
		"ref HEAD":              "# v2 git bundle\n" + shaA + " HEAD\n\n",
		"ref one component":     "# v2 git bundle\n" + shaA + " main\n\n",
		"prerequisite garbage":  "# v2 git bundle\n-" + shaA + "x\n" + shaB + " refs/heads/x\n\n",
		"prerequisite no sha":   "# v2 git bundle\n-\n" + shaB + " refs/heads/x\n\n",
		"carriage return":       "# v2 git bundle\r\n" + shaA + " refs/heads/x\n\n",
		"nul byte":              "# v2 git bundle\n" + shaA + " refs/heads/\x00x\n\n",
		"oversized header line": "# v2 git bundle\n" + shaA + " refs/heads/" + strings.Repeat("x", maxBundleHeaderBytes) + "\n\n",
		"too many lines":        "# v2 git bundle\n" + strings.Repeat("-"+shaA+"\n", maxBundleHeaderLines+1) + shaB + " refs/heads/x\n\n",
	}
	for name, in := range invalid {
		t.Run(name, func(t *testing.T) {
			_, err := parseBundleHeader(bufio.NewReader(strings.NewReader(in)))
			require.Error(t, err)
			assert.True(t, errors.Is(err, errBundleHeader), "%v", err)
		})
	}
}

func TestCheckPackSignature(t *testing.T) {
	assert.NoError(t, checkPackSignature(bufio.NewReader(strings.NewReader("PACK\x00\x00\x00\x02"))))
	assert.Error(t, checkPackSignature(bufio.NewReader(strings.NewReader("PAC"))))
	assert.Error(t, checkPackSignature(bufio.NewReader(strings.NewReader("KCAP"))))
}

func TestCheckInputHeader(t *testing.T) {
	input := plumbing.NewHash(shaA)
	ok := &bundleHeader{References: []bundleRef{{Hash: input, Name: "refs/forge/inputs/abc"}}}
	assert.NoError(t, checkInputHeader(ok, input))
	for name, h := range map[string]*bundleHeader{
		"prerequisite": {Prerequisites: []bundlePrerequisite{{Hash: input}}, References: ok.References},
		"two refs":     {References: append(append([]bundleRef{}, ok.References...), ok.References...)},
		"other prefix": {References: []bundleRef{{Hash: input, Name: "refs/heads/main"}}},
		"other commit": {References: []bundleRef{{Hash: plumbing.NewHash(shaB), Name: "refs/forge/inputs/abc"}}},
	} {
		assert.Error(t, checkInputHeader(h, input), name)
	}
}

func TestResultRefName(t *testing.T) {
	assert.Equal(t, plumbing.ReferenceName("refs/forge/results/0b6f6a3e8d0e4c1a9f532f3c1e2d4a5b"), resultRefName(testAttemptID))
	assert.Equal(t, "abcdef", attemptHex("AB-CD-EF"))
}

// FuzzParseBundleHeader checks that the bundle header parser never panics,
// stays within its bounds and only accepts well-formed headers.
func FuzzParseBundleHeader(f *testing.F) {
	f.Add([]byte("# v2 git bundle\n" + shaA + " refs/forge/inputs/abc\n\nPACK"))
	f.Add([]byte("# v2 git bundle\n-" + shaA + " subject\n" + shaB + " refs/forge/results/x\n\n"))
	f.Add([]byte("# v2 git bundle\n-" + shaA + "\n\n"))
	f.Add([]byte("# v3 git bundle\n@object-format=sha1\n\n"))
	f.Add([]byte("# v2 git bundle\n" + shaA + " refs/heads/a..b\n\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		br := bufio.NewReader(r)
		h, err := parseBundleHeader(br)
		if err != nil {
			return
		}
		consumed := len(data) - r.Len() - br.Buffered()
		if consumed > maxBundleHeaderBytes {
			t.Fatalf("consumed %d header bytes", consumed)
		}
		if len(h.References) == 0 {
			t.Fatal("accepted a header without references")
		}
		for _, ref := range h.References {
			if ref.Hash.IsZero() && !strings.Contains(string(data), strings.Repeat("0", 40)) {
				t.Fatal("zero hash from nowhere")
			}
			if err := ref.Name.Validate(); err != nil {
				t.Fatalf("accepted invalid ref name %q", ref.Name)
			}
		}
		if !bytes.HasPrefix(data, []byte(bundleSignatureV2+"\n")) {
			t.Fatal("accepted a header without the v2 signature")
		}
	})
}
