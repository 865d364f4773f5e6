package dockerops

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// Plain volumes (no bounded store) given to a sandbox user by OwnVolumes:
// the worker, running as that user, owns and writes /workspace and
// /control/output, and reads /control/input; the image's files stay the
// image user's and are not writable.
func TestIntegrationOwnVolumesGivesPlainVolumesToTheSandboxUser(t *testing.T) {
	user := messages.SandboxUser{UID: 100007, GID: 100007}
	script := "id -u; id -g; stat -c '%n %u:%g %a' /workspace /control /control/input /control/output /home/forge /tmp /opt/forge/forged; " +
		"touch /workspace/w /control/output/o && echo wrote; (echo x >> /opt/forge/forged) 2>/dev/null && echo image-written || echo image-refused"
	var owned error
	s := provision(t, script, func(spec *WorkerSpec) {
		spec.User = user
		c := requireEngine(t)
		owned = c.OwnVolumes(context.Background(), spec.Image, spec.Name+"-volume-owner", spec.Labels,
			[]OwnedVolume{{Volume: spec.WorkspaceVolume}, {Volume: spec.ControlVolume, Dirs: []string{"input", "output"}}}, user)
	})
	require.NoError(t, owned)
	ctx := testCtx(t)
	lines, res, err := s.run(t, ctx, "", RunLimits{})
	require.NoError(t, err)
	assert.Equal(t, 0, res.ExitCode, "%v", lines)
	assert.Equal(t, []string{
		"100007", "100007",
		"/workspace 100007:100007 755",
		"/control 100007:100007 755",
		"/control/input 100007:100007 755",
		"/control/output 100007:100007 755",
		"/home/forge 100007:100007 700",
		"/tmp 100007:100007 1777",
		"/opt/forge/forged 0:0 555",
		"wrote",
		"image-refused",
	}, lines)
}
