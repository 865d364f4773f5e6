// Package probe holds the readiness probes a probe container runs on an
// attempt network (`forged-worker worker probe`): each speaks its service's
// own protocol (the postgres startup handshake and SELECT 1, redis AUTH and
// PING, the browser's DevTools /json/version, the egress proxy's refusal of
// an unlisted name). It is a leaf of the worker binary: it owns the service
// names, which package services re-exports, and imports neither Docker nor
// any daemon package.
package probe

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/forgedev/forged/internal/kit/text"
)

// The services a probe speaks to (package services re-exports them).
const (
	Postgres = "postgres"
	Redis    = "redis"
	Browser  = "browser"
	Egress   = "egress"
)

// Target is what a readiness probe connects to.
type Target struct {
	Service, Host string
	Port          int
	User          string
	Database      string
	PasswordFile  string
}

// maxSecretBytes bounds a password file.
const maxSecretBytes = 4096

func (t Target) password() (string, error) {
	f, err := os.Open(t.PasswordFile)
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxSecretBytes+1))
	if err != nil {
		return "", fmt.Errorf("password file: %w", err)
	}
	if len(b) > maxSecretBytes {
		return "", errors.New("password file is too large")
	}
	return strings.TrimRight(string(b), "\r\n"), nil
}

// ProbeOnce checks the service once with its own protocol: for postgres the
// startup handshake, SCRAM authentication and SELECT 1 answering 1; for
// redis AUTH then PING answering PONG. Errors never carry the password.
func ProbeOnce(ctx context.Context, t Target) error {
	switch t.Service {
	case Browser:
		return probeBrowser(ctx, t)
	case Egress:
		return probeEgress(ctx, t)
	}
	pw, err := t.password()
	if err != nil {
		return err
	}
	switch t.Service {
	case Postgres:
		return probePostgres(ctx, t, pw)
	case Redis:
		return probeRedis(ctx, t, pw)
	}
	return fmt.Errorf("no probe for service %q", t.Service)
}

func probePostgres(ctx context.Context, t Target, pw string) error {
	cfg, err := pgconn.ParseConfig("sslmode=disable connect_timeout=5")
	if err != nil {
		return err
	}
	cfg.Host, cfg.Port, cfg.User, cfg.Database, cfg.Password = t.Host, uint16(t.Port), t.User, t.Database, pw
	cfg.Fallbacks = nil
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("postgres connect: %s", scrub(err.Error(), pw))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	results, err := conn.Exec(ctx, "SELECT 1").ReadAll()
	if err != nil {
		return fmt.Errorf("postgres SELECT 1: %s", scrub(err.Error(), pw))
	}
	if len(results) != 1 || len(results[0].Rows) != 1 || len(results[0].Rows[0]) != 1 || string(results[0].Rows[0][0]) != "1" {
		return errors.New("postgres SELECT 1 did not answer 1")
	}
	return nil
}

func probeRedis(ctx context.Context, t Target, pw string) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.Host, strconv.Itoa(t.Port)))
	if err != nil {
		return fmt.Errorf("redis connect: %w", err)
	}
	defer conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	r := bufio.NewReaderSize(conn, 512)
	cmd := func(args ...string) (string, error) {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := conn.Write([]byte(b.String())); err != nil {
			return "", err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return "", err
		}
		return strings.TrimRight(line, "\r\n"), nil
	}
	args := []string{"AUTH", pw}
	if t.User != "" {
		args = []string{"AUTH", t.User, pw}
	}
	reply, err := cmd(args...)
	if err != nil {
		return fmt.Errorf("redis AUTH: %w", err)
	}
	if reply != "+OK" {
		return fmt.Errorf("redis AUTH answered %q", text.Clip(scrub(reply, pw), maxReplyBytes))
	}
	reply, err = cmd("PING")
	if err != nil {
		return fmt.Errorf("redis PING: %w", err)
	}
	if reply != "+PONG" {
		return fmt.Errorf("redis PING answered %q", text.Clip(reply, maxReplyBytes))
	}
	return nil
}

// probeBrowser asks DevTools for /json/version (with Host: localhost, the
// only name DevTools answers besides an IP) and expects a browser and its
// WebSocket debugger URL.
func probeBrowser(ctx context.Context, t Target) error {
	url := "http://" + net.JoinHostPort(t.Host, strconv.Itoa(t.Port)) + "/json/version"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	req.Host = "localhost"
	client := &http.Client{Timeout: 5 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("browser DevTools: %w", err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return fmt.Errorf("browser DevTools /json/version answered %d", res.StatusCode)
	}
	var v struct {
		Browser              string `json:"Browser"`
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	if err := json.NewDecoder(io.LimitReader(res.Body, 64<<10)).Decode(&v); err != nil {
		return fmt.Errorf("browser DevTools /json/version: %w", err)
	}
	if v.Browser == "" || v.WebSocketDebuggerURL == "" {
		return errors.New("browser DevTools /json/version names no browser or debugger URL")
	}
	return nil
}

// probeEgress asks the egress proxy to CONNECT to a name no allowlist can
// hold (.invalid is reserved) and expects its refusal: the proxy answers
// and denies what is not on its list. It never leaves the proxy: unlisted
// names are refused before any DNS lookup.
func probeEgress(ctx context.Context, t Target) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(t.Host, strconv.Itoa(t.Port)))
	if err != nil {
		return fmt.Errorf("egress proxy connect: %w", err)
	}
	defer conn.Close()
	deadline := time.Now().Add(5 * time.Second)
	if dl, ok := ctx.Deadline(); ok && dl.Before(deadline) {
		deadline = dl
	}
	_ = conn.SetDeadline(deadline)
	if _, err := io.WriteString(conn, "CONNECT probe.forge.invalid:443 HTTP/1.1\r\nHost: probe.forge.invalid:443\r\n\r\n"); err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	line, err := bufio.NewReaderSize(conn, 512).ReadString('\n')
	if err != nil {
		return fmt.Errorf("egress proxy: %w", err)
	}
	if status := strings.TrimRight(line, "\r\n"); !strings.HasPrefix(status, "HTTP/1.1 403 ") {
		return fmt.Errorf("egress proxy answered %q to an unlisted name, not 403", text.Clip(status, maxReplyBytes))
	}
	return nil
}

// maxReplyBytes bounds a service's reply quoted in a probe error.
const maxReplyBytes = 120

func scrub(s, secret string) string {
	if secret == "" {
		return s
	}
	return strings.ReplaceAll(s, secret, "[redacted]")
}

// WaitReady probes every interval until the service answers, ctx ends or
// within passes, and returns the last probe error. This runs inside a probe
// container (forged-worker worker probe), which owns its process: sleeping
// between tries is its whole job.
func WaitReady(ctx context.Context, t Target, within, interval time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	var last error
	for {
		tryCtx, tryCancel := context.WithTimeout(ctx, 5*time.Second)
		last = ProbeOnce(tryCtx, t)
		tryCancel()
		if last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not ready within %s: %w", t.Service, within, last)
		case <-time.After(interval):
		}
	}
}
