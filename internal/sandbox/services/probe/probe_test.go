package probe

import (
	"bufio"
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeRedis answers AUTH with the given password and PING on loopback.
func fakeRedis(t *testing.T, password string) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				authed := false
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					var args []string
					n := 0
					if _, err := fmtSscan(line, &n); err != nil {
						return
					}
					for i := 0; i < n; i++ {
						_, _ = r.ReadString('\n')
						a, _ := r.ReadString('\n')
						args = append(args, strings.TrimRight(a, "\r\n"))
					}
					switch {
					case args[0] == "AUTH" && args[len(args)-1] == password:
						authed = true
						c.Write([]byte("+OK\r\n"))
					case args[0] == "AUTH":
						c.Write([]byte("-WRONGPASS invalid username-password pair " + args[len(args)-1] + "\r\n"))
					case args[0] == "PING" && authed:
						c.Write([]byte("+PONG\r\n"))
					default:
						c.Write([]byte("-NOAUTH Authentication required.\r\n"))
					}
				}
			}()
		}
	}()
	return l.Addr().(*net.TCPAddr).Port
}

func fmtSscan(line string, n *int) (int, error) {
	line = strings.TrimRight(line, "\r\n")
	if !strings.HasPrefix(line, "*") {
		return 0, os.ErrInvalid
	}
	v := 0
	for _, c := range line[1:] {
		if c < '0' || c > '9' {
			return 0, os.ErrInvalid
		}
		v = v*10 + int(c-'0')
	}
	*n = v
	return 1, nil
}

func TestRedisProbeAuthenticatesAndPings(t *testing.T) {
	port := fakeRedis(t, "s3cret-value")
	file := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(file, []byte("s3cret-value"), 0o444))
	target := Target{Service: Redis, Host: "127.0.0.1", Port: port, PasswordFile: file}
	assert.NoError(t, ProbeOnce(context.Background(), target))

	require.NoError(t, os.WriteFile(file+"2", []byte("wrong-value"), 0o444))
	target.PasswordFile = file + "2"
	err := ProbeOnce(context.Background(), target)
	require.Error(t, err)
	assert.NotContains(t, err.Error(), "wrong-value", "the password never appears in a probe error")
}

func TestWaitReadyGivesUpAtItsCap(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens
	file := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o444))
	err = WaitReady(context.Background(), Target{Service: Redis, Host: "127.0.0.1", Port: port, PasswordFile: file}, 200*time.Millisecond, 20*time.Millisecond)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "not ready within 200ms")
}
