package egress

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// MaxLogLine bounds one access log line; longer lines are not parsed.
const MaxLogLine = 1024

// Decision is what the proxy did with a request.
type Decision string

const (
	Allowed Decision = "allowed"
	Denied  Decision = "denied"
	// Failed: the proxy admitted the request but could not serve it, or
	// refused it as malformed.
	Failed Decision = "failed"
)

// Access is one access log record.
type Access struct {
	Time     string   `json:"time"`
	Method   string   `json:"method"`
	Host     string   `json:"host"`
	Port     int      `json:"port"`
	Status   int      `json:"status"`
	Result   string   `json:"result"`
	Decision Decision `json:"decision"`
	Bytes    int64    `json:"bytes"`
}

var (
	logTime   = regexp.MustCompile(`^[0-9]{1,12}$`)
	logMethod = regexp.MustCompile(`^[A-Z][A-Z_-]{0,31}$`)
	// logHost is a host as squid logs it: a name, an IPv4 address or a
	// bracketed IPv6 address; "-" when the request had none.
	logHost   = regexp.MustCompile(`^([a-z0-9_.-]{1,253}|\[[0-9a-f:.]{2,45}\]|-)$`)
	logResult = regexp.MustCompile(`^[A-Z][A-Z_]{0,47}(/[A-Z_]{1,32})?$`)
)

// ParseLine reads one line of the forge1 access log format:
//
//	forge1 <unix seconds> <method> <host> <port> <status> <result> <bytes>
//
// Every field is checked strictly; a line that does not match is refused
// whole. The task chooses the method, host and port of its requests, so
// nothing here is trusted beyond its pattern.
func ParseLine(line []byte) (Access, error) {
	if len(line) > MaxLogLine {
		return Access{}, errors.New("line too long")
	}
	line = bytes.TrimSuffix(line, []byte("\r"))
	f := strings.Split(string(line), " ")
	if len(f) != 8 || f[0] != LogFormat {
		return Access{}, errors.New("not a forge1 line")
	}
	a := Access{Time: f[1], Method: f[2], Host: strings.ToLower(f[3]), Result: f[6]}
	switch {
	case !logTime.MatchString(a.Time):
		return Access{}, fmt.Errorf("bad time")
	case !logMethod.MatchString(a.Method):
		return Access{}, fmt.Errorf("bad method")
	case !logHost.MatchString(a.Host):
		return Access{}, fmt.Errorf("bad host")
	case !logResult.MatchString(a.Result):
		return Access{}, fmt.Errorf("bad result")
	}
	var err error
	if a.Port, err = boundedInt(f[4], 0, 65535, true); err != nil {
		return Access{}, fmt.Errorf("port: %w", err)
	}
	if a.Status, err = boundedInt(f[5], 0, 999, false); err != nil {
		return Access{}, fmt.Errorf("status: %w", err)
	}
	bytesOut, err := boundedInt(f[7], 0, 1<<53, false)
	if err != nil {
		return Access{}, fmt.Errorf("bytes: %w", err)
	}
	a.Bytes = int64(bytesOut)
	switch {
	case strings.Contains(a.Result, "DENIED"):
		a.Decision = Denied
	case a.Status == 0 || a.Status >= 400 || strings.HasPrefix(a.Result, "NONE") || strings.HasPrefix(a.Result, "TAG_NONE"):
		a.Decision = Failed
	default:
		a.Decision = Allowed
	}
	return a, nil
}

// boundedInt parses a decimal in [lo, hi]; "-" is 0 when dash is allowed.
func boundedInt(s string, lo, hi int, dash bool) (int, error) {
	if dash && s == "-" {
		return 0, nil
	}
	if s == "" || len(s) > 16 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, errors.New("not a decimal")
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Errorf("outside [%d, %d]", lo, hi)
	}
	return n, nil
}
