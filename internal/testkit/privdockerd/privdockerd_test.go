package privdockerd_test

import (
	"context"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/example"
	"github.com/forgedev/forged/internal/testkit/enginetest"
	"github.com/forgedev/forged/internal/testkit/privdockerd"
)

// TestPrivateEngineLoadsRestartsAndLeavesNothing starts a private engine,
// loads an image from the shared one, runs a container across a restart
// (it stops with the engine: no live-restore) and checks that the
// cleanup leaves no process, mount or directory behind.
func TestPrivateEngineLoadsRestartsAndLeavesNothing(t *testing.T) {
	shared := enginetest.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	docker, err := dockerops.Connect(ctx, dockerops.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer docker.Close()
	if _, err := example.BuildBaseImage(ctx, docker, "/bin/busybox"); err != nil {
		t.Fatal(err)
	}

	// The host's default bridge is the shared engine's: a private engine
	// started with --bridge=none deleted it.
	_, bridgeErr := net.InterfaceByName("docker0")
	t.Cleanup(func() {
		if _, err := net.InterfaceByName("docker0"); bridgeErr == nil && err != nil {
			t.Errorf("the shared engine's docker0 is gone after the private engine ran: %v", err)
		}
	})
	var root string
	var pid int
	t.Run("engine", func(t *testing.T) {
		d := privdockerd.Start(t, privdockerd.Options{})
		root = d.Root()
		d.LoadImages(shared, example.BaseImage)
		c := d.Client()
		created, err := c.ContainerCreate(ctx, &container.Config{Image: example.BaseImage, Cmd: []string{"sleep", "600"}}, nil, nil, nil, "")
		if err != nil {
			t.Fatal(err)
		}
		if err := c.ContainerStart(ctx, created.ID, container.StartOptions{}); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(root + "/docker.pid")
		if err != nil {
			t.Fatal(err)
		}
		d.Restart()
		again, err := os.ReadFile(root + "/docker.pid")
		if err != nil {
			t.Fatal(err)
		}
		if string(raw) == string(again) {
			t.Fatalf("the restart kept dockerd's pid %s", raw)
		}
		info, err := c.ContainerInspect(ctx, created.ID)
		if err != nil {
			t.Fatal(err)
		}
		if info.State.Running {
			t.Fatal("without live-restore the container should have stopped with the engine")
		}
		if _, err := c.ImageInspect(ctx, example.BaseImage); err != nil {
			t.Fatalf("the loaded image is gone after the restart: %v", err)
		}
		if pid, err = strconv.Atoi(strings.TrimSpace(string(again))); err != nil {
			t.Fatal(err)
		}
	})
	if _, err := os.Stat(root); !os.IsNotExist(err) {
		t.Errorf("the private engine's root %s remains (%v)", root, err)
	}
	mounts, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	if root != "" && strings.Contains(string(mounts), root) {
		t.Errorf("mounts under %s remain", root)
	}
	if pid > 0 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); err == nil {
			t.Errorf("dockerd (pid %d) still runs", pid)
		}
	}
}
