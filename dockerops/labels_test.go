package dockerops

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func fixedDispatch() *messages.Dispatch {
	d := testDispatch()
	d.Session.ID = "00000000-0000-4000-8000-000000000001"
	d.Execution.RunnerID = "00000000-0000-4000-8000-000000000002"
	d.Lease.FencingToken = "00000000-0000-4000-8000-000000000003"
	d.Lease.ExpiresAt = time.Date(2030, 1, 2, 3, 4, 5, 0, time.FixedZone("x", 3600))
	d.Sandbox.DispatchAttemptID = "0123abcd-0000-4000-8000-00000000abcd"
	d.Sandbox.ExecutionLeaseID = "00000000-0000-4000-8000-000000000005"
	d.Sandbox.RunnerInstanceID = "00000000-0000-4000-8000-000000000006"
	d.Repo.Name = "acme/widgets"
	return d
}

func TestNamesFor(t *testing.T) {
	n, err := NamesFor("0123abcd-0000-4000-8000-00000000abcd")
	require.NoError(t, err)
	hex := "0123abcd000040008000" + "00000000abcd"
	assert.Equal(t, Names{
		AttemptHex:        hex,
		Prefix:            "forge-" + hex,
		Container:         "forge-agent-" + hex,
		Network:           "forge-" + hex,
		WorkspaceVolume:   "forge-" + hex + "-workspace",
		ControlVolume:     "forge-" + hex + "-control",
		SecretsVolume:     "forge-" + hex + "-secrets",
		SecretsLoader:     "forge-" + hex + "-secrets-loader",
		VolumeOwner:       "forge-" + hex + "-volume-owner",
		CredentialsVolume: "forge-" + hex + "-credentials",
	}, n)

	for _, bad := range []string{"", "0123abcd", "0123ABCD-0000-4000-8000-00000000ABCD", "0123abcd000040008000" + "00000000abcd",
		"0123abcd-0000-4000-8000-00000000abcd ", "../../etc-0000-4000-8000-00000000abcd"} {
		_, err := NamesFor(bad)
		assert.Equal(t, failure.SandboxIdentityInvalid, failure.CodeOf(err), bad)
	}
}

func TestLabels(t *testing.T) {
	d := fixedDispatch()
	labels, err := Labels(d, "sha256:img", "sha256:contract")
	require.NoError(t, err)
	assert.Equal(t, map[string]string{
		"dev.forge.managed":             "true",
		"dev.forge.session-id":          "00000000-0000-4000-8000-000000000001",
		"dev.forge.resource-lease-id":   "00000000-0000-4000-8000-000000000005",
		"dev.forge.execution-lease-id":  "00000000-0000-4000-8000-000000000005",
		"dev.forge.dispatch-attempt-id": "0123abcd-0000-4000-8000-00000000abcd",
		"dev.forge.fencing-token":       "00000000-0000-4000-8000-000000000003",
		"dev.forge.runner-id":           "00000000-0000-4000-8000-000000000002",
		"dev.forge.runner-instance-id":  "00000000-0000-4000-8000-000000000006",
		"dev.forge.project":             "acme/widgets",
		"dev.forge.image-digest":        "sha256:img",
		"dev.forge.contract-digest":     "sha256:contract",
		"dev.forge.initial-expires-at":  "2030-01-02T02:04:05Z",
	}, labels)
	assert.True(t, OwnershipOf(d).Matches(labels))
}

func TestLabelsProjectSanitised(t *testing.T) {
	d := fixedDispatch()
	for name, want := range map[string]string{
		"a\r\nb\x00c":            "a  b c",
		"  padded  ":             "padded",
		"\n\n":                   "unknown",
		strings.Repeat("x", 300): strings.Repeat("x", 120),
		strings.Repeat("é", 100): strings.Repeat("é", 60),
	} {
		d.Repo.Name = name
		labels, err := Labels(d, "", "")
		require.NoError(t, err)
		assert.Equal(t, want, labels[LabelProject], "%q", name)
		assert.LessOrEqual(t, len(labels[LabelProject]), 120)
	}
}

func TestLabelsRejectsNonUUIDIdentities(t *testing.T) {
	mutations := map[string]func(*messages.Dispatch){
		"attempt":         func(d *messages.Dispatch) { d.Sandbox.DispatchAttemptID = "attempt-1" },
		"lease":           func(d *messages.Dispatch) { d.Sandbox.ExecutionLeaseID = "" },
		"runner":          func(d *messages.Dispatch) { d.Execution.RunnerID = "runner" },
		"runner instance": func(d *messages.Dispatch) { d.Sandbox.RunnerInstanceID = "ABCDEF00-0000-4000-8000-000000000006" },
		"fencing token":   func(d *messages.Dispatch) { d.Lease.FencingToken = "42" },
	}
	for name, mutate := range mutations {
		d := fixedDispatch()
		mutate(d)
		_, err := Labels(d, "i", "c")
		assert.Equal(t, failure.SandboxIdentityInvalid, failure.CodeOf(err), name)
	}
	_, err := Labels(nil, "", "")
	assert.Equal(t, failure.SandboxIdentityInvalid, failure.CodeOf(err))
}

func TestOwnershipMatches(t *testing.T) {
	d := fixedDispatch()
	o := OwnershipOf(d)
	base, err := Labels(d, "i", "c")
	require.NoError(t, err)
	assert.True(t, o.Matches(base))

	// Free-text labels do not take part in ownership.
	other := clone(base)
	other[LabelProject] = "something else"
	other[LabelImageDigest] = "sha256:other"
	assert.True(t, o.Matches(other))

	for _, key := range []string{LabelManaged, LabelAttemptID, LabelResourceLeaseID, LabelExecutionLeaseID,
		LabelRunnerID, LabelRunnerInstanceID, LabelFencingToken} {
		changed := clone(base)
		changed[key] = "00000000-0000-4000-8000-0000000000ff"
		assert.False(t, o.Matches(changed), "changed %s", key)
		missing := clone(base)
		delete(missing, key)
		assert.False(t, o.Matches(missing), "missing %s", key)
	}
	assert.False(t, o.Matches(nil))

	// A zero or partial ownership matches nothing, not even empty labels.
	assert.False(t, Ownership{}.Matches(map[string]string{LabelManaged: "true"}))
	partial := o
	partial.FencingToken = ""
	withEmpty := clone(base)
	withEmpty[LabelFencingToken] = ""
	assert.False(t, partial.Matches(withEmpty))
}

func TestOwnershipFromLabelsAndMayReap(t *testing.T) {
	d := fixedDispatch()
	labels, err := Labels(d, "i", "c")
	require.NoError(t, err)
	o, ok := OwnershipFromLabels(labels)
	require.True(t, ok)
	assert.Equal(t, OwnershipOf(d), o)

	split := clone(labels)
	split[LabelResourceLeaseID] = "00000000-0000-4000-8000-0000000000ff"
	_, ok = OwnershipFromLabels(split)
	assert.False(t, ok, "resource and execution lease ids must agree")
	unmanaged := clone(labels)
	unmanaged[LabelManaged] = "false"
	_, ok = OwnershipFromLabels(unmanaged)
	assert.False(t, ok)

	runner := d.Execution.RunnerID
	assert.True(t, MayReap(labels, runner, nil))
	assert.True(t, MayReap(labels, runner, func(string) bool { return false }))
	assert.False(t, MayReap(labels, runner, func(id string) bool { return id == d.AttemptID() }))
	assert.False(t, MayReap(labels, "00000000-0000-4000-8000-0000000000ff", nil))
	assert.False(t, MayReap(split, runner, nil))
}

func clone(m map[string]string) map[string]string {
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}
