package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMainKeepsSubmodules(t *testing.T) {
	for _, withGitmodules := range []bool{false, true} {
		f := newFixture(t, sh("echo x > x.txt")...)
		link := "0123456789abcdef0123456789abcdef01234567"
		f.host.git("update-index", "--add", "--cacheinfo", "160000,"+link+",vendor/lib")
		if withGitmodules {
			f.host.write(".gitmodules", "[submodule \"lib\"]\n\tpath = vendor/lib\n\turl = https://example.invalid/lib.git\n")
			f.host.git("add", ".gitmodules")
		}
		f.host.git("commit", "-q", "-m", "with submodule")
		f.input = f.host.git("rev-parse", "HEAD")
		f.pkt.Identity.InputCommitSHA = f.input
		f.bundleInput(f.input)
		res := f.run()
		require.Equal(t, ExitOK, res.code, "stderr: %s", res.stderr)
		sha := f.fetchResult()
		assert.Equal(t, "A\tx.txt", f.host.git("diff", "--name-status", f.input, sha), "gitmodules=%v", withGitmodules)
	}
}
