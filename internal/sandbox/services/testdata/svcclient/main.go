// Command svcclient is the small static client the service tests' sandbox
// image carries: inside a task it talks to the attempt's postgres and redis
// through the connection details forged hands the task (PGHOST, PGPORT,
// PGUSER, PGDATABASE, FORGE_POSTGRES_PASSWORD_FILE; FORGE_REDIS_*), and
// writes what it read into the workspace, so that the result commit carries
// it.
//
//	svcclient talk           postgres and redis: write, read back, save to services.txt
//	svcclient browser        DevTools /json/version of the browser service, save to browser.txt
//	svcclient reach ADDR...  try TCP to each address, save "ADDR reachable|unreachable" to reach.txt
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: svcclient talk | reach ADDR..."))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	switch os.Args[1] {
	case "talk":
		pg, err := talkPostgres(ctx)
		if err != nil {
			fail(err)
		}
		rd, err := talkRedis()
		if err != nil {
			fail(err)
		}
		write("services.txt", "postgres: "+pg+"\nredis: "+rd+"\nsecrets: "+secretsState()+"\n")
	case "browser":
		v, err := browserVersion(ctx)
		if err != nil {
			fail(err)
		}
		write("browser.txt", "browser: "+v+"\n")
	case "reach":
		var b strings.Builder
		for _, addr := range os.Args[2:] {
			state := "unreachable"
			if c, err := net.DialTimeout("tcp", addr, 3*time.Second); err == nil {
				c.Close()
				state = "reachable"
			}
			fmt.Fprintf(&b, "%s %s\n", addr, state)
		}
		write("reach.txt", b.String())
	default:
		fail(fmt.Errorf("unknown command %q", os.Args[1]))
	}
}

// secretsState reports how the task sees its password files: they must be
// root-owned, 0444, and refuse writing (the volume is read-only).
func secretsState() string {
	out := "read-only"
	for _, env := range []string{"FORGE_POSTGRES_PASSWORD_FILE", "FORGE_REDIS_PASSWORD_FILE"} {
		path := os.Getenv(env)
		info, err := os.Stat(path)
		if err != nil {
			return "missing " + env
		}
		st, ok := info.Sys().(*syscall.Stat_t)
		if info.Mode().Perm() != 0o444 || !ok || st.Uid != 0 {
			out = fmt.Sprintf("%s is %v uid %d", path, info.Mode().Perm(), st.Uid)
		}
		if f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0); err == nil {
			f.Close()
			return "WRITABLE " + path
		}
	}
	return out
}

func password(env string) string {
	b, err := os.ReadFile(os.Getenv(env))
	if err != nil {
		fail(err)
	}
	return strings.TrimSpace(string(b))
}

func talkPostgres(ctx context.Context) (string, error) {
	cfg, err := pgconn.ParseConfig("sslmode=disable connect_timeout=10") // PGHOST, PGPORT, PGUSER, PGDATABASE from the environment
	if err != nil {
		return "", err
	}
	cfg.Password = password("FORGE_POSTGRES_PASSWORD_FILE")
	conn, err := pgconn.ConnectConfig(ctx, cfg)
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	defer conn.Close(ctx)
	res, err := conn.Exec(ctx, "CREATE TABLE notes (body text); INSERT INTO notes VALUES ('written by the task'); SELECT body || ' in ' || current_database() || ' as ' || current_user FROM notes").ReadAll()
	if err != nil {
		return "", fmt.Errorf("postgres: %w", err)
	}
	last := res[len(res)-1]
	if len(last.Rows) != 1 {
		return "", fmt.Errorf("postgres: %d rows", len(last.Rows))
	}
	// The task's role is no superuser: it cannot run programs in the
	// service container.
	escape := "escape refused"
	if _, err := conn.Exec(ctx, "COPY (SELECT 1) TO PROGRAM 'id'").ReadAll(); err == nil {
		escape = "ESCAPED: COPY TO PROGRAM ran"
	}
	return string(last.Rows[0][0]) + "; " + escape, nil
}

func talkRedis() (string, error) {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(os.Getenv("REDIS_HOST"), os.Getenv("REDIS_PORT")), 10*time.Second)
	if err != nil {
		return "", fmt.Errorf("redis: %w", err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	send := func(args ...string) string {
		fmt.Fprintf(conn, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(conn, "$%d\r\n%s\r\n", len(a), a)
		}
		line, _ := r.ReadString('\n')
		line = strings.TrimRight(line, "\r\n")
		if strings.HasPrefix(line, "$") && line != "$-1" {
			body, _ := r.ReadString('\n')
			return strings.TrimRight(body, "\r\n")
		}
		return line
	}
	if got := send("AUTH", password("FORGE_REDIS_PASSWORD_FILE")); got != "+OK" {
		return "", fmt.Errorf("redis AUTH: %q", got)
	}
	if got := send("SET", "greeting", "stored by the task"); got != "+OK" {
		return "", fmt.Errorf("redis SET: %q", got)
	}
	return send("GET", "greeting"), nil
}

func browserVersion(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, os.Getenv("FORGE_BROWSER_URL")+"/json/version", nil)
	if err != nil {
		return "", err
	}
	req.Host = "localhost" // DevTools answers only an IP or localhost
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("browser: %w", err)
	}
	defer res.Body.Close()
	var v struct{ Browser string }
	if err := json.NewDecoder(res.Body).Decode(&v); err != nil {
		return "", fmt.Errorf("browser: %w", err)
	}
	return v.Browser, nil
}

func write(name, content string) {
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "svcclient:", err)
	os.Exit(1)
}
