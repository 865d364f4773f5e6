package worker

import (
	"bytes"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/sandbox/services"
	"github.com/forgedev/forged/internal/sandbox/services/probe"
	"github.com/forgedev/forged/messages"
)

// command runs the worker binary's command line and returns its exit
// status and stderr.
func command(args []string, stdin io.Reader) (int, string) {
	var stdout, stderr bytes.Buffer
	code := Command(args, stdin, &stdout, &stderr)
	return code, stderr.String()
}

func TestCommandRefusesCommandLinesItDoesNotKnow(t *testing.T) {
	for _, args := range [][]string{
		nil,
		{"probe"},
		{"worker", "nope"},
		{"worker", "lease-update", "extra"},
		{"worker", "probe", "--bogus"},
		{"worker", "probe", "--service", "redis", "extra"},
	} {
		code, stderr := command(args, strings.NewReader(""))
		assert.Equal(t, ExitUsage, code, "%q", args)
		assert.NotEmpty(t, stderr, "%q", args)
	}
}

// The entrypoint is Main: an empty stdin holds no start packet.
func TestCommandWorkerRunsTheEntrypoint(t *testing.T) {
	code, stderr := command([]string{"worker"}, strings.NewReader(""))
	assert.Equal(t, ExitInternal, code)
	assert.Contains(t, stderr, "forged worker: ")
}

// Every probe command line the host writes (services.Definition.ProbeArgs)
// is the worker's own: the flags land in the probe's target.
func TestProbeFlagsReadTheHostsCommandLine(t *testing.T) {
	for _, name := range []string{services.Postgres, services.Redis, services.Browser} {
		def, ok := services.DefinitionFor(name)
		require.True(t, ok, name)
		args := def.ProbeArgs(messages.WorkerBinaryPath, "45s")
		require.Equal(t, []string{messages.WorkerBinaryPath, "worker", "probe"}, args[:3])
		target, within, err := probeFlags(args[3:], io.Discard)
		require.NoError(t, err, name)
		end := def.Endpoint()
		assert.Equal(t, probe.Target{Service: name, Host: end.Host, Port: end.Port, User: end.User, Database: end.Database, PasswordFile: end.PasswordFile}, target)
		assert.Equal(t, 45*time.Second, within)
	}
}

// A probe exits 0 once the service answers (here a stand-in for the
// egress proxy, which refuses an unlisted name with 403), and 1 with the
// last error once its cap passes.
func TestProbeCommandExitStatus(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "HTTP/1.1 403 Forbidden\r\n\r\n")
			c.Close()
		}
	}()
	port := strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	code, stderr := command([]string{"worker", "probe", "--service", probe.Egress, "--host", "127.0.0.1", "--port", port, "--within", "10s"}, nil)
	assert.Equal(t, 0, code, stderr)

	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port = strconv.Itoa(closed.Addr().(*net.TCPAddr).Port)
	closed.Close() // nothing listens
	code, stderr = command([]string{"worker", "probe", "--service", probe.Egress, "--host", "127.0.0.1", "--port", port, "--within", "50ms"}, nil)
	assert.Equal(t, 1, code)
	assert.Contains(t, stderr, "egress not ready within 50ms")
}
