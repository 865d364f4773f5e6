package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/fleet"
	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// The lean build spells two of the fleet's rules so that it need not
// link the fleet: the flag's default and what makes a daemon a member.
func TestFleetFlagsFollowTheFleetsConfig(t *testing.T) {
	assert.Equal(t, fleet.DefaultReturnGrace, defaultFleetReturnGrace)
	for _, f := range []fleetFlags{
		{}, {etcd: []string{"http://127.0.0.1:2379"}}, {name: "trial"}, {advertise: "127.0.0.1:7001"},
		{caFile: "ca.pem", cert: "c.pem", keyFile: "k.pem", placement: true},
	} {
		cfg := fleet.Config{Endpoints: f.etcd, Name: f.name, Advertise: f.advertise, CAFile: f.caFile, CertFile: f.cert, KeyFile: f.keyFile, Placement: f.placement}
		assert.Equal(t, cfg.Enabled(), f.enabled(), "%+v", f)
	}
}

// forged, as built by default, links none of the fleet's stack; its fleet
// build does. The idle daemon's memory is mostly its own code (B5).
func TestLeanBuildLinksNoFleet(t *testing.T) {
	fleetOnly := []string{
		"github.com/forgedev/forged/internal/fleet",
		"go.etcd.io/etcd/client/v3",
		"google.golang.org/grpc",
		"github.com/asynkron/protoactor-go/remote",
		"github.com/asynkron/protoactor-go/cluster",
		"github.com/gogo/protobuf/proto",
	}
	deps := func(tags ...string) map[string]bool {
		args := append([]string{"list", "-deps", "-f", "{{.ImportPath}}"}, tags...)
		cmd := exec.Command("go", append(args, ".")...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		require.NoError(t, err, "go list: %s", stderr.String())
		set := map[string]bool{}
		for _, p := range strings.Fields(string(out)) {
			set[p] = true
		}
		return set
	}
	lean, linked := deps(), deps("-tags", "fleet")
	for _, p := range fleetOnly {
		assert.False(t, lean[p], "the lean build links %s", p)
		assert.True(t, linked[p], "the fleet build does not link %s", p)
	}
}

// Given fleet settings, forged runs the fleet build beside it, with the
// same arguments; without one there, it says what to install, before
// anything starts.
func TestLeanBuildHandsFleetCommandsToTheFleetBuild(t *testing.T) {
	forged := enginetest.ForgedFleetBinary(t)
	run := func(binary string, args ...string) (string, error) {
		var out bytes.Buffer
		cmd := exec.Command(binary, args...)
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	// The fleet build answers: only it checks the fleet's settings.
	out, err := run(forged, "fleet", "--json")
	require.Error(t, err)
	assert.Contains(t, out, "config: fleetAdvertise: name the member to ask")

	// Alone, the lean build refuses, naming the missing build; the
	// daemon starts nothing (its state root is never made).
	alone := filepath.Join(t.TempDir(), "forged")
	copyExecutable(t, forged, alone)
	out, err = run(alone, "fleet")
	require.Error(t, err)
	assert.Contains(t, out, "the lean build, without the fleet, and its fleet build is not beside it: install "+filepath.Join(filepath.Dir(alone), fleetBinary))
	stateRoot := filepath.Join(t.TempDir(), "state")
	out, err = run(alone, "daemon", "--state-root", stateRoot, "--fleet-name", "trial")
	require.Error(t, err)
	assert.Contains(t, out, "its fleet build is not beside it")
	assert.NoDirExists(t, stateRoot)

	// A lean build installed as the fleet build does not hand itself to
	// itself for ever.
	dir := t.TempDir()
	copyExecutable(t, forged, filepath.Join(dir, "forged"))
	copyExecutable(t, forged, filepath.Join(dir, fleetBinary))
	out, err = run(filepath.Join(dir, "forged"), "fleet")
	require.Error(t, err)
	assert.Contains(t, out, "is a lean build of forged: build it with -tags fleet")
}

func copyExecutable(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(to, data, 0o755))
}
