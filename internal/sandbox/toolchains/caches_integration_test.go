package toolchains_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/sandbox/caches"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/testimages"
	"github.com/forgedev/forged/messages"
	"github.com/forgedev/forged/supervisor"
)

// npmCacheTask asks npm itself, offline, where its cache is, what it
// holds, and whether a package the task packs can be added to it. The
// answers go to the report file, which the attempt commits.
const npmCacheTask = `
{
echo "cache=$(npm config get cache)"
echo "owner=$(stat -c %u "$npm_config_cache")"
echo "warmed=$(npm cache ls 2>/dev/null | grep -c warmed-pkg-1.0.0.tgz)"
mkdir /tmp/p && cd /tmp/p && printf '{"name":"task-pkg","version":"1.0.0"}' > package.json && npm pack >/dev/null 2>&1
if npm cache add ./task-pkg-1.0.0.tgz >/dev/null 2>&1; then echo add=DONE; else echo add=refused; fi
echo "task=$(npm cache ls 2>/dev/null | grep -c task-pkg-1.0.0.tgz)"
} > /workspace/` + reportFile + ` 2>&1
`

// TestToolchainNpmUsesItsCaches runs the real npm of the node toolchain
// image against both cache modes: the project's read-only cache, warmed by
// the operator with npm, is where npm looks and lists the warmed package,
// and npm cannot add to it; a per-attempt cache is fresh (the warmed
// package is not there), the worker's, and npm adds to it.
func TestToolchainNpmUsesItsCaches(t *testing.T) {
	engine := enginetest.Client(t)
	img, ok := catalogue(t)["node"]
	if !ok {
		missing(t, "the image catalogue has no node image: run scripts/images.sh")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := engine.ImageInspect(ctx, img.Ref); err != nil {
		missing(t, fmt.Sprintf("image %s is not in the engine (%v): run scripts/images.sh", img.Ref, err))
	}
	r := newRunner(t)
	project := testimages.Project("toolchains-npm-cache")
	t.Cleanup(func() { assert.NoError(t, testimages.RemoveProject(project)) })
	volumeName := caches.ProjectVolume(project, "npm")
	t.Cleanup(func() { _ = engine.VolumeRemove(context.Background(), volumeName, true) })

	_, err := caches.Warm(ctx, engine, caches.WarmRequest{Project: project, Cache: "npm", Image: img.Ref, Command: []string{"/bin/sh", "-c",
		`mkdir /tmp/p && cd /tmp/p && printf '{"name":"warmed-pkg","version":"1.0.0"}' > package.json && npm pack && npm cache add ./warmed-pkg-1.0.0.tgz`}})
	require.NoError(t, err)

	for _, mode := range []string{"readonly", "per_attempt"} {
		t.Run(mode, func(t *testing.T) {
			repo := sampleRepo(t, "node", "FROM "+img.Ref+"\n")
			require.NoError(t, os.WriteFile(filepath.Join(repo, ".forge", "forge.sandbox.yml"),
				[]byte("version: 1\nworkingDirectory: /workspace\ncaches:\n  - {name: npm, mode: "+mode+"}\n"), 0o644))
			git(t, repo, "add", "-A")
			git(t, repo, "-c", "user.name=forged test", "-c", "user.email=test@forge.invalid", "commit", "-q", "-m", "npm cache "+mode)
			d, err := example.NewDispatch(example.DispatchOptions{RunnerID: r.RunnerID(), RepoPath: repo, Project: project,
				Argv: []string{"/bin/sh", "-c", npmCacheTask}, Timeout: 300})
			require.NoError(t, err)
			reply, err := r.Submit(d)
			require.NoError(t, err)
			require.True(t, reply.Accepted, "%+v", reply)
			t.Cleanup(func() { enginetest.AssertNoneLabelled(t, engine, d.AttemptID()) })
			log, ok := r.Logs().Get(d.AttemptID())
			require.True(t, ok)
			wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Minute)
			defer wcancel()
			out, err := log.Wait(wctx)
			require.NoError(t, err)
			require.Equal(t, messages.StatusSucceeded, out.Status, "%s: %s\n%s", out.Code, out.Message, taskOutput(log))

			got := map[string]string{}
			for _, line := range strings.Split(git(t, repo, "show", d.Lease.WorktreeKey+":"+reportFile), "\n") {
				k, v, _ := strings.Cut(line, "=")
				got[k] = v
			}
			want := map[string]string{"cache": "/home/forge/.npm", "owner": "0", "warmed": "1", "add": "refused", "task": "0"}
			if mode == "per_attempt" {
				want = map[string]string{"cache": "/home/forge/.npm", "owner": strconv.Itoa(supervisor.DefaultUIDBase), "warmed": "0", "add": "DONE", "task": "1"}
			}
			assert.Equal(t, want, got)
		})
	}
}
