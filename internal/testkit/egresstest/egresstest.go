// Package egresstest gives egress tests a stand-in for the internet: a
// Docker network of its own holding an HTTP server on ports 80, 443 and 22
// (busybox httpd serving a page that names it) and a second server under a
// dotted network alias, which the engine's embedded resolver answers with a
// private address no operator mapping names; and (traps.go) stand-ins for
// the metadata service and a public address of the host, on a bridge
// interface of the test's own, with listeners that count what reaches
// them. Everything stays on this machine and is removed at the test's
// cleanup.
package egresstest

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/client"
	"github.com/docker/docker/errdefs"

	"github.com/forgedev/forged/internal/kit/text"
)

// Page is the body the stand-in serves.
const Page = "forged-egress-standin-ok"

// IntranetName is the alias the second server answers to on the stand-in
// network: a name that resolves to a private address no mapping exempts.
const IntranetName = "intranet.test"

// StandIn is a running stand-in for the internet.
type StandIn struct {
	// Network is the stand-in network's name (the proxy's upstream).
	Network string
	// Addr is the server's address on it.
	Addr string
}

// Start creates the stand-in network and its servers from image (any
// image with busybox at /bin/busybox), labelled dev.forge.test.
func Start(t testing.TB, c *client.Client, image string) StandIn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	suffix := text.Clip(strings.ReplaceAll(t.Name(), "/", "-"), 24)
	name := "forged-standin-" + strings.ToLower(suffix) + "-" + time.Now().Format("150405.000000")
	labels := map[string]string{"dev.forge.test": "egress-standin"}
	created, err := c.NetworkCreate(ctx, name, network.CreateOptions{Driver: "bridge", Internal: true, Labels: labels})
	if err != nil {
		t.Fatalf("stand-in network: %v", err)
	}
	var containers []string
	t.Cleanup(func() {
		cleanup, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		for _, id := range containers {
			if err := c.ContainerRemove(cleanup, id, container.RemoveOptions{Force: true}); err != nil && !errdefs.IsNotFound(err) {
				t.Errorf("remove stand-in container: %v", err)
			}
		}
		if err := c.NetworkRemove(cleanup, created.ID); err != nil && !errdefs.IsNotFound(err) {
			t.Errorf("remove stand-in network: %v", err)
		}
	})
	script := `mkdir -p /tmp/www && echo "` + Page + ` $0" >/tmp/www/index.html || exit 1; ` +
		`busybox httpd -f -p 80 -h /tmp/www & busybox httpd -f -p 443 -h /tmp/www & busybox httpd -f -p 22 -h /tmp/www & wait`
	start := func(role string, aliases []string) string {
		resp, err := c.ContainerCreate(ctx, &container.Config{
			Image: image, Labels: labels, Entrypoint: []string{"/bin/busybox", "sh", "-c", script, role},
		}, &container.HostConfig{NetworkMode: container.NetworkMode(name)},
			&network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{name: {Aliases: aliases}}}, nil, "")
		if err != nil {
			t.Fatalf("stand-in %s: %v", role, err)
		}
		containers = append(containers, resp.ID)
		if err := c.ContainerStart(ctx, resp.ID, container.StartOptions{}); err != nil {
			t.Fatalf("stand-in %s start: %v", role, err)
		}
		inspected, err := c.ContainerInspect(ctx, resp.ID)
		if err != nil {
			t.Fatalf("stand-in %s inspect: %v", role, err)
		}
		return inspected.NetworkSettings.Networks[name].IPAddress
	}
	addr := start("internet", nil)
	if addr == "" {
		t.Fatal("the stand-in server has no address")
	}
	start("intranet", []string{IntranetName})
	// Serving: every port of both servers answers, asked inside them.
	for _, id := range containers {
		if err := waitListening(ctx, c, id); err != nil {
			t.Fatalf("stand-in: %v", err)
		}
	}
	return StandIn{Network: name, Addr: addr}
}

// waitListening asks inside the container, until its servers answer or
// ctx ends, whether ports 80, 443 and 22 listen.
func waitListening(ctx context.Context, c *client.Client, id string) error {
	for {
		exec, err := c.ContainerExecCreate(ctx, id, container.ExecOptions{
			Cmd: []string{"/bin/busybox", "sh", "-c", "for p in 80 443 22; do busybox nc -w 1 127.0.0.1 $p </dev/null || exit 1; done"}})
		if err != nil {
			return err
		}
		if err := c.ContainerExecStart(ctx, exec.ID, container.ExecStartOptions{Detach: true}); err != nil {
			return err
		}
		for {
			st, err := c.ContainerExecInspect(ctx, exec.ID)
			if err != nil {
				return err
			}
			if !st.Running {
				if st.ExitCode == 0 {
					return nil
				}
				break
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s: servers never answered: %w", id[:12], ctx.Err())
			case <-time.After(20 * time.Millisecond):
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s: servers never answered: %w", id[:12], ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// EgressImage returns the egress proxy's image id from the service
// catalogue scripts/service-images.sh writes ($FORGED_SERVICES_FILE, or
// bin/services.tsv under root): skipped without one, failed with CI=true.
func EgressImage(t testing.TB, root string) string {
	t.Helper()
	path := os.Getenv("FORGED_SERVICES_FILE")
	if path == "" {
		path = filepath.Join(root, "bin", "services.tsv")
	}
	f, err := os.Open(path)
	if err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Split(sc.Text(), "\t")
			if len(fields) >= 3 && fields[0] == "egress" {
				return fields[2]
			}
		}
		err = os.ErrNotExist
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but no egress image in the service catalogue %s (run scripts/service-images.sh): %v", path, err)
	}
	t.Skipf("no egress image in the service catalogue %s (run scripts/service-images.sh): %v", path, err)
	return ""
}
