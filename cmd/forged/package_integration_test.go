package main_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/pkg/stdcopy"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/testkit/enginetest"
)

// packageRoot is the image scripts/package-root.sh builds (a Debian
// minbase root filesystem with the package's dependencies), read from its
// catalogue: a test that needs it fails under CI=true without it.
func packageRoot(t *testing.T) string {
	t.Helper()
	path, err := filepath.Abs(filepath.Join("..", "..", "bin", "package-root.tsv"))
	require.NoError(t, err)
	raw, err := os.ReadFile(path)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no package root image (run scripts/package-root.sh): %v", err)
		}
		t.Skipf("no package root image (run scripts/package-root.sh): %v", err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if fields := strings.Split(line, "\t"); len(fields) > 1 && fields[0] == "install" {
			return fields[1]
		}
	}
	t.Fatalf("%s names no install image", path)
	return ""
}

// TestDebianPackageInstallsIntoAFreshRoot builds the package with
// scripts/deb.sh and installs it with dpkg into a fresh Debian root
// filesystem (a container without a network): the files land with their
// modes, the postinst makes the forged user and its directories, forged
// runs as that user, and remove and purge leave what they should.
func TestDebianPackageInstallsIntoAFreshRoot(t *testing.T) {
	engine := enginetest.Client(t)
	image := packageRoot(t)
	if _, err := exec.LookPath("dpkg-deb"); err != nil {
		t.Fatalf("dpkg-deb is missing: %v", err)
	}
	out := t.TempDir()
	build := exec.Command("bash", filepath.Join("..", "..", "scripts", "deb.sh"), "--version", "1.2.3~test", "--out", out)
	build.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	built, err := build.CombinedOutput()
	require.NoError(t, err, "%s", built)
	deb := strings.TrimSpace(string(built))
	require.FileExists(t, deb)
	require.NoError(t, os.Chmod(out, 0o755))

	script := `set -eu
dpkg -i /pkg/` + filepath.Base(deb) + ` >/dev/null
echo "user $(getent passwd forged | cut -d: -f1,6,7)"
echo "group $(getent group forged | cut -d: -f1)"
for f in /usr/bin/forged /usr/bin/forged-worker /usr/bin/forged-fleet /lib/systemd/system/forged.service /usr/lib/tmpfiles.d/forged.conf \
  /etc/forged/forged.yaml /var/lib/forged /var/lib/forged/build-logs /run/lock/forged \
  /usr/share/forged/grafana/forged-dashboard.json /usr/share/forged/prometheus/forged-alerts.yml; do
  echo "stat $(stat -c '%a %U:%G' "$f") $f"
done
echo "exec $(grep '^ExecStart=' /lib/systemd/system/forged.service)"
echo "version $(setpriv --reuid forged --regid forged --init-groups forged --version)"
setpriv --reuid forged --regid forged --init-groups forged --help | grep -q 'Run sandbox attempts' && echo "help ok"
echo "fleet $(forged fleet 2>&1 || true)"
echo "conffiles $(dpkg-query -W -f='${Conffiles}' forged | awk '{print $1}')"
dpkg -r forged >/dev/null
echo "removed $(test -e /usr/bin/forged && echo binary-left || echo binary-gone) $(test -e /etc/forged/forged.yaml && echo conffile-kept || echo conffile-gone)"
dpkg -P forged >/dev/null
echo "purged $(test -e /etc/forged/forged.yaml && echo conffile-left || echo conffile-gone) $(test -d /var/lib/forged && echo state-kept || echo state-gone)"
`
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	created, err := engine.ContainerCreate(ctx, &container.Config{
		Image: image, Cmd: []string{"sh", "-c", script}, User: "0:0",
		Labels: map[string]string{"org.forged.test": t.Name()},
	}, &container.HostConfig{
		NetworkMode: "none",
		Mounts:      []mount.Mount{{Type: mount.TypeBind, Source: out, Target: "/pkg", ReadOnly: true}},
	}, nil, nil, "")
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		assert.NoError(t, engine.ContainerRemove(ctx, created.ID, container.RemoveOptions{Force: true, RemoveVolumes: true}))
	})
	require.NoError(t, engine.ContainerStart(ctx, created.ID, container.StartOptions{}))
	waited, errs := engine.ContainerWait(ctx, created.ID, container.WaitConditionNotRunning)
	var code int64
	select {
	case res := <-waited:
		code = res.StatusCode
	case err := <-errs:
		require.NoError(t, err)
	}
	logs, err := engine.ContainerLogs(ctx, created.ID, container.LogsOptions{ShowStdout: true, ShowStderr: true})
	require.NoError(t, err)
	defer logs.Close()
	var stdout, stderr bytes.Buffer
	_, err = stdcopy.StdCopy(&stdout, &stderr, logs)
	require.NoError(t, err)
	require.Zero(t, code, "install script failed:\n%s\n%s", stdout.String(), stderr.String())

	got := stdout.String()
	for _, want := range []string{
		"user forged:/var/lib/forged:/usr/sbin/nologin",
		"group forged",
		"stat 755 root:root /usr/bin/forged\n",
		"stat 755 root:root /usr/bin/forged-worker\n",
		"stat 755 root:root /usr/bin/forged-fleet\n",
		"stat 644 root:root /lib/systemd/system/forged.service\n",
		"stat 644 root:root /usr/lib/tmpfiles.d/forged.conf\n",
		"stat 640 root:forged /etc/forged/forged.yaml\n",
		"stat 700 forged:forged /var/lib/forged\n",
		"stat 700 forged:forged /var/lib/forged/build-logs\n",
		"stat 700 forged:forged /run/lock/forged\n",
		"stat 644 root:root /usr/share/forged/grafana/forged-dashboard.json\n",
		"stat 644 root:root /usr/share/forged/prometheus/forged-alerts.yml\n",
		"exec ExecStart=/usr/bin/forged daemon --config /etc/forged/forged.yaml\n",
		"version forged version 1.2.3~test\n",
		// forged hands a fleet command to forged-fleet, which answers.
		"fleet forged: config: fleetAdvertise: name the member to ask",
		"help ok\n",
		"conffiles /etc/forged/forged.yaml\n",
		"removed binary-gone conffile-kept\n",
		"purged conffile-gone state-kept\n",
	} {
		assert.Contains(t, got, want)
	}
}
