package messages

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var branchCases = []struct {
	name string
	ok   bool
}{
	{"main", true}, {"forge/task-1", true}, {"a.b/c_d", true}, {"v1.2", true},
	{"", false}, {"-x", false}, {"a..b", false}, {"a//b", false}, {"/a", false}, {"a/", false},
	{"a.", false}, {".a", false}, {"a/.b", false}, {"a.lock", false}, {"a.lock/b", false},
	{"a@{1}", false}, {"a b", false}, {"a~1", false}, {"a^", false}, {"a:b", false}, {"a\\b", false},
	{"a*", false}, {"a?", false}, {"a[", false}, {"é", false}, {"a\x00", false}, {"@", false},
	{strings.Repeat("a", 200), true}, {strings.Repeat("a", 201), false},
}

func TestValidBranch(t *testing.T) {
	for _, c := range branchCases {
		assert.Equal(t, c.ok, ValidBranch(c.name), "%q", c.name)
	}
}

// Every name ValidBranch accepts, git accepts too.
func TestValidBranchIsWithinGitsRules(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("no git")
	}
	for _, c := range branchCases {
		if !c.ok {
			continue
		}
		out, err := exec.Command("git", "check-ref-format", "--branch", c.name).CombinedOutput()
		assert.NoError(t, err, "%q: %s", c.name, out)
	}
}

func FuzzValidBranch(f *testing.F) {
	for _, c := range branchCases {
		f.Add(c.name)
	}
	f.Fuzz(func(t *testing.T, name string) {
		if !ValidBranch(name) {
			return
		}
		// What is accepted can be put after refs/heads/ safely.
		if strings.Contains(name, "..") || strings.HasPrefix(name, "-") || strings.ContainsAny(name, " ~^:?*[\\@") {
			t.Fatalf("accepted %q", name)
		}
	})
}
