package egress

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseLineReadsSquidRecords(t *testing.T) {
	for line, want := range map[string]Access{
		"forge1 1764730000 CONNECT www.test 443 200 TCP_TUNNEL 5120": {
			Time: "1764730000", Method: "CONNECT", Host: "www.test", Port: 443, Status: 200, Result: "TCP_TUNNEL", Decision: Allowed, Bytes: 5120},
		"forge1 1764730000 CONNECT www.test 22 403 TCP_DENIED 3890": {
			Time: "1764730000", Method: "CONNECT", Host: "www.test", Port: 22, Status: 403, Result: "TCP_DENIED", Decision: Denied, Bytes: 3890},
		"forge1 1764730001 GET other.test 443 403 TCP_DENIED 3900": {
			Time: "1764730001", Method: "GET", Host: "other.test", Port: 443, Status: 403, Result: "TCP_DENIED", Decision: Denied, Bytes: 3900},
		"forge1 1764730001 GET www.test 443 503 TCP_MISS 4000": {
			Time: "1764730001", Method: "GET", Host: "www.test", Port: 443, Status: 503, Result: "TCP_MISS", Decision: Failed, Bytes: 4000},
		"forge1 1764730001 NONE - - 400 NONE_NONE 3800": {
			Time: "1764730001", Method: "NONE", Host: "-", Port: 0, Status: 400, Result: "NONE_NONE", Decision: Failed, Bytes: 3800},
		"forge1 1764730001 GET [::1] 443 403 TCP_DENIED/NONE 10": {
			Time: "1764730001", Method: "GET", Host: "[::1]", Port: 443, Status: 403, Result: "TCP_DENIED/NONE", Decision: Denied, Bytes: 10},
	} {
		got, err := ParseLine([]byte(line))
		require.NoError(t, err, line)
		assert.Equal(t, want, got, line)
	}
}

func TestParseLineRefusesAnythingElse(t *testing.T) {
	for _, line := range []string{
		"",
		"forge1",
		"forge2 1 GET a.test 443 200 TCP_TUNNEL 1",
		"forge1 1 GET a.test 443 200 TCP_TUNNEL 1 extra",
		"forge1 1 GET a.test  443 200 TCP_TUNNEL 1",
		"forge1 1 get a.test 443 200 TCP_TUNNEL 1",
		"forge1 1 GET a\x1b[31m.test 443 200 TCP_TUNNEL 1",
		"forge1 1 GET a.test 99999 200 TCP_TUNNEL 1",
		"forge1 1 GET a.test 443 2000 TCP_TUNNEL 1",
		"forge1 1 GET a.test 443 200 tcp_tunnel 1",
		"forge1 1 GET a.test 443 200 TCP_TUNNEL -1",
		"forge1 1 GET a.test 443 200 TCP_TUNNEL 1e9",
		"forge1 x GET a.test 443 200 TCP_TUNNEL 1",
		"forge1 1 GET a.test +443 200 TCP_TUNNEL 1",
		"forge1 1 GET " + strings.Repeat("a", 300) + ".test 443 200 TCP_TUNNEL 1",
		"forge1 1 GET a.test 443 200 TCP_TUNNEL " + strings.Repeat("1", 2000),
	} {
		_, err := ParseLine([]byte(line))
		assert.Error(t, err, "%q", line)
	}
}

func FuzzParseLine(f *testing.F) {
	f.Add([]byte("forge1 1764730000 CONNECT www.test 443 200 TCP_TUNNEL 5120"))
	f.Add([]byte("forge1 1 NONE - - 400 NONE_NONE 3800"))
	f.Fuzz(func(t *testing.T, line []byte) {
		a, err := ParseLine(line)
		if err != nil {
			return
		}
		// What passes is printable, bounded and classified.
		for _, s := range []string{a.Time, a.Method, a.Host, a.Result} {
			require.NotEmpty(t, s)
			for _, r := range s {
				require.True(t, r > ' ' && r < 0x7f, "%q", s)
			}
		}
		require.LessOrEqual(t, len(a.Host), 255)
		require.True(t, a.Port >= 0 && a.Port <= 65535)
		require.True(t, a.Bytes >= 0)
		require.Contains(t, []Decision{Allowed, Denied, Failed}, a.Decision)
	})
}
