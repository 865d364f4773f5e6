package gitops

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestParseWorktreeList(t *testing.T) {
	t.Parallel()
	a, b := oid('a'), oid('b')
	tests := []struct {
		name string
		in   string
		want []worktree
	}{
		{"empty", "", nil},
		{
			"main and linked",
			"worktree /src/repo\x00HEAD " + a + "\x00branch refs/heads/main\x00\x00" +
				"worktree /src/wt\x00HEAD " + b + "\x00branch refs/heads/forge/task\x00locked\x00\x00",
			[]worktree{
				{Path: "/src/repo", Head: a, Branch: "refs/heads/main"},
				{Path: "/src/wt", Head: b, Branch: "refs/heads/forge/task"},
			},
		},
		{
			"bare and detached",
			"worktree /src/bare.git\x00bare\x00\x00worktree /src/d\x00HEAD " + a + "\x00detached\x00\x00",
			[]worktree{{Path: "/src/bare.git", Bare: true}, {Path: "/src/d", Head: a, Detached: true}},
		},
		{
			"path with spaces and newline",
			"worktree /src/my tree\nx\x00HEAD " + a + "\x00branch refs/heads/x\x00\x00",
			[]worktree{{Path: "/src/my tree\nx", Head: a, Branch: "refs/heads/x"}},
		},
		{
			"relative path dropped, missing separator tolerated",
			"worktree rel\x00branch refs/heads/r\x00worktree /abs\x00branch refs/heads/a\x00",
			[]worktree{{Path: "/abs", Branch: "refs/heads/a"}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, parseWorktreeList(tc.in))
		})
	}
}

func TestBundleHeadFor(t *testing.T) {
	t.Parallel()
	a, b := oid('a'), oid('b')
	heads := func(raw string) *BundleHeader {
		h, err := ParseBundleHeader(strings.NewReader("# v2 git bundle\n" + raw + "\nPACK"))
		require.NoError(t, err)
		return h
	}
	h := heads(b + " refs/heads/other\n" + a + " refs/forge/results/x\n" + a + " refs/heads/dup\n")
	assert.Equal(t, "refs/forge/results/x", h.headFor(a))
	assert.Equal(t, "refs/heads/other", h.headFor(b))
	assert.Equal(t, "HEAD", heads(a+" HEAD\n").headFor(a))
	assert.Equal(t, "", h.headFor(oid('c')))
	for _, bad := range []string{"refs/heads/a:refs/heads/b", "+refs/heads/x", "refs/heads/*", "refs/../x", "refs//x", "refs/x/", "heads/x", "refs/a b", "refs/x^"} {
		assert.Equal(t, "", heads(a+" "+bad+"\n").headFor(a), bad)
	}
}

func TestParseBundleHeader(t *testing.T) {
	t.Parallel()
	a, b := oid('a'), oid('b')
	raw := "# v2 git bundle\n-" + a + " input\n" + b + " refs/forge/results/x\n\nPACK..."
	h, err := ParseBundleHeader(strings.NewReader(raw))
	require.NoError(t, err)
	assert.Equal(t, []string{a}, h.Prerequisites)
	assert.Equal(t, []BundleHead{{ID: b, Name: "refs/forge/results/x"}}, h.Heads)
	assert.Equal(t, int64(strings.Index(raw, "PACK")), h.PackOffset)
	for name, bad := range map[string]string{
		"v3":            "# v3 git bundle\n@object-format=sha256\n" + b + " refs/x\n\n",
		"no heads":      "# v2 git bundle\n-" + a + "\n\n",
		"truncated":     "# v2 git bundle\n" + b + " refs/x\n",
		"short id":      "# v2 git bundle\n" + b[:39] + " refs/x\n\n",
		"upper case id": "# v2 git bundle\n" + strings.ToUpper(b) + " refs/x\n\n",
		"carriage":      "# v2 git bundle\n" + b + " refs/x\r\n\n",
		"sha256 id":     "# v2 git bundle\n" + strings.Repeat("b", 64) + " refs/x\n\n",
		"huge":          "# v2 git bundle\n" + strings.Repeat(b+" refs/x\n", 2000) + "\n",
	} {
		_, err := ParseBundleHeader(strings.NewReader(bad))
		require.Error(t, err, name)
		assert.True(t, failure.Is(err, failure.SandboxOutputInvalid), name)
	}
}

func TestAttemptHex(t *testing.T) {
	t.Parallel()
	got, ok := attemptHex(testAttemptID)
	assert.True(t, ok)
	assert.Equal(t, testAttemptHex, got)
	for _, bad := range []string{"", testAttemptHex, strings.ToUpper(testAttemptID), "../" + testAttemptID} {
		_, ok := attemptHex(bad)
		assert.False(t, ok, bad)
	}
}

func TestParseTreeListing(t *testing.T) {
	t.Parallel()
	a, b := oid('a'), oid('b')
	got := parseTreeListing("100644 blob " + a + "\t.forge/forge.sandbox.yml\x00120000 blob " + b + "\t.forge/Dockerfile\x00")
	assert.Equal(t, map[string]treeEntry{
		".forge/forge.sandbox.yml": {"100644", "blob", a},
		".forge/Dockerfile":        {"120000", "blob", b},
	}, got)
	assert.Empty(t, parseTreeListing(""))
}
