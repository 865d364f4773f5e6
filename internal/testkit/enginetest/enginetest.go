// Package enginetest helps tests that need the real Docker engine: they run
// whenever an engine answers, fail (never skip) under CI=true when none
// does, and can assert that nothing labelled for an attempt remains.
package enginetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"

	"github.com/forgedev/forged/internal/testkit/testbin"
	"github.com/forgedev/forged/internal/testkit/workerbin"
)

// Client returns an Engine API client, skipping the test when no engine
// answers, or failing it when CI=true.
func Client(t testing.TB) *client.Client {
	t.Helper()
	c, err := client.NewClientWithOpts(client.FromEnv, client.WithAPIVersionNegotiation())
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_, err = c.Ping(ctx)
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no Docker engine answers: %v", err)
		}
		t.Skipf("no Docker engine answers (run scripts/ensure-docker.sh): %v", err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Labelled lists the containers, networks and volumes carrying label
// (key=value).
func Labelled(t testing.TB, c *client.Client, label string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	args := filters.NewArgs(filters.Arg("label", label))
	var out []string
	containers, err := c.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
	if err != nil {
		t.Fatalf("list containers: %v", err)
	}
	for _, ct := range containers {
		out = append(out, "container "+ct.ID[:12])
	}
	networks, err := c.NetworkList(ctx, network.ListOptions{Filters: args})
	if err != nil {
		t.Fatalf("list networks: %v", err)
	}
	for _, n := range networks {
		out = append(out, "network "+n.Name)
	}
	volumes, err := c.VolumeList(ctx, volume.ListOptions{Filters: args})
	if err != nil {
		t.Fatalf("list volumes: %v", err)
	}
	for _, v := range volumes.Volumes {
		out = append(out, "volume "+v.Name)
	}
	return out
}

// AssertNoneLabelled fails the test if anything carries the attempt's
// label, or if an anonymous volume was left (AssertNoAnonymousVolumes).
func AssertNoneLabelled(t testing.TB, c *client.Client, attemptID string) {
	t.Helper()
	if left := Labelled(t, c, "dev.forge.dispatch-attempt-id="+attemptID); len(left) > 0 {
		t.Errorf("resources of attempt %s remain: %v", attemptID, left)
	}
	AssertNoAnonymousVolumes(t, c)
}

// processStart is when this test process began: the anonymous volumes the
// leak check counts are those the engine created since.
var processStart = time.Now().Truncate(time.Second)

// anonymousName matches the engine's names of anonymous volumes (a random
// 64-hex id); named volumes of tests never look like that.
var anonymousName = regexp.MustCompile(`^[0-9a-f]{64}$`)

// AnonymousVolumes lists the anonymous volumes no container uses that the
// engine created since this test process started: what a container
// created from an image with a VOLUME, removed without its volumes, leaves
// behind. They carry no label, so Labelled never sees them.
func AnonymousVolumes(t testing.TB, c *client.Client) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := c.VolumeList(ctx, volume.ListOptions{Filters: filters.NewArgs(filters.Arg("dangling", "true"))})
	if err != nil {
		t.Fatalf("list volumes: %v", err)
	}
	var out []string
	for _, v := range list.Volumes {
		if v == nil {
			continue
		}
		created, err := time.Parse(time.RFC3339, v.CreatedAt)
		if len(v.Labels) > 0 || !anonymousName.MatchString(v.Name) || (err == nil && created.Before(processStart)) {
			continue
		}
		out = append(out, "volume "+v.Name)
	}
	return out
}

// AssertNoAnonymousVolumes fails the test if an anonymous volume created
// since this test process started is left with no container. A container
// removed with its volumes leaves them dangling for the moment between
// the two removals, so the check waits up to 10 s for them to go.
func AssertNoAnonymousVolumes(t testing.TB, c *client.Client) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := AnonymousVolumes(t, c)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("anonymous volumes remain: %v", left)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// ForgedBinary builds the static forged binary once per test process
// (CGO_ENABLED=0), into the process's binaries directory (package testbin),
// and returns its path. The forged-worker binary (workerbin.Path) lies
// beside it, where forged looks for the worker to put into sandbox images.
func ForgedBinary(t testing.TB) string {
	t.Helper()
	binary := testbin.Build(t, "forged", "", "-trimpath", forgedPackage)
	workerbin.Place(t, filepath.Dir(binary))
	return binary
}

// ForgedFleetBinary is ForgedBinary with forged's fleet build
// (forged-fleet, `go build -tags fleet`) beside it. It returns the lean
// forged's path: given fleet settings, it runs the fleet build, as an
// installed forged does (docs/fleet.md).
func ForgedFleetBinary(t testing.TB) string {
	t.Helper()
	binary := ForgedBinary(t)
	fleetBinary := testbin.Build(t, "forged-fleet", "", "-trimpath", "-tags", "fleet", forgedPackage)
	if filepath.Dir(fleetBinary) != filepath.Dir(binary) {
		t.Fatalf("forged-fleet (%s) is not beside forged (%s)", fleetBinary, binary)
	}
	return binary
}

// ForgedBinaryVersion builds a forged binary stamped with version (its
// main.version) into a directory of the test's own, with the shared
// forged-worker beside it, and returns its path: two such builds are two
// releases of the daemon around one worker.
func ForgedBinaryVersion(t testing.TB, version string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "forged")
	if err := buildForged(path, version); err != nil {
		t.Fatal(err)
	}
	workerbin.Place(t, filepath.Dir(path))
	return path
}

// forgedPackage is the daemon's main package.
const forgedPackage = "github.com/forgedev/forged/cmd/forged"

// buildForged builds cmd/forged into out, stamped with version unless it
// is empty.
func buildForged(out, version string) error {
	args := []string{"build", "-trimpath", "-o", out}
	if version != "" {
		args = append(args, "-ldflags", "-X main.version="+version)
	}
	cmd := exec.Command("go", append(args, forgedPackage)...)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build forged: %w: %s", err, output)
	}
	return nil
}
