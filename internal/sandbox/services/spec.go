package services

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"path"
	"strconv"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/sandbox/services/probe"
	"github.com/forgedev/forged/messages"
)

// The services a contract may declare.
// Their names are the probes' (package probe, a leaf of the worker binary).
const (
	Postgres = probe.Postgres
	Redis    = probe.Redis
	Browser  = probe.Browser
	// Egress is the catalogue entry of the egress proxy's image: not a
	// contract service (the contract parser admits none of that name),
	// run beside the worker for networkPolicy.mode public_allowlist.
	Egress = probe.Egress
)

// Per-service limits beside the memory split.
const (
	serviceNanoCPUs = 1_000_000_000
	passwordBytes   = 32
)

// Definition is how forged runs one service from its catalogue image
// (scripts/service-images.sh builds them with these users).
type Definition struct {
	Service  string
	Port     int
	UID      int
	User     string // the connection user ("" when the service has none)
	Database string // the connection database ("" when none)
	// SecretFile is the password's file name in the secrets volume; ""
	// for a service without credentials (the browser: DevTools has no
	// authentication, the attempt network is its only boundary).
	SecretFile string
	// PIDs is the container's PIDs limit (threads count).
	PIDs int64
	// Env is the service's own environment (never a secret).
	Env []string
	// DataDirs are the service's writable directories, each a tmpfs owned
	// by the service's user, mode 0700, with its size.
	DataDirs map[string]string
	// Cmd starts the service; it reads the password from its file (never
	// from an argument or the environment).
	Cmd []string
	// Caps is what the image needs beyond nothing: empty for both
	// services (each runs as its own user on directories it owns).
	Caps []string
}

// secretPath is the password file's path in a container, "" without one.
func (d Definition) secretPath() string {
	if d.SecretFile == "" {
		return ""
	}
	return path.Join(dockerops.SecretsDir, d.SecretFile)
}

var definitions = map[string]Definition{
	Postgres: {
		Service: Postgres, Port: 5432, UID: 999, User: "forge", Database: "forge",
		SecretFile: "postgres-password", PIDs: 256,
		DataDirs: map[string]string{
			"/var/lib/postgresql/data": "512m",
			"/tmp":                     "64m",
		},
		// initdb on the tmpfs; the superuser (postgres) has no password,
		// so it can log in only on the container's own socket, never from
		// the network. The task's role forge is no superuser (no COPY TO
		// PROGRAM into the service container) and owns the database forge;
		// both are made in single-user mode, the password going through
		// the shell's own printf into stdin, never into an argument. Host
		// connections authenticate by SCRAM only. Then the server runs in
		// the foreground (exec: docker-init's only child).
		Cmd: []string{"/bin/sh", "-ec", `bin=/usr/lib/postgresql/15/bin
data=/var/lib/postgresql/data
"$bin/initdb" -D "$data" -U postgres --auth-local=trust --auth-host=scram-sha-256 --no-locale -E UTF8 --no-instructions >/dev/null
echo "host all all all scram-sha-256" >>"$data/pg_hba.conf"
printf "CREATE ROLE forge LOGIN PASSWORD '%s'\nCREATE DATABASE forge OWNER forge\n" "$(cat /run/forge-secrets/postgres-password)" |
  "$bin/postgres" --single -D "$data" postgres >/dev/null
exec "$bin/postgres" -D "$data" -c listen_addresses='*' -c unix_socket_directories=/tmp -c fsync=off`},
	},
	Redis: {
		Service: Redis, Port: 6379, UID: 998, User: "default",
		SecretFile: "redis-password", PIDs: 256,
		DataDirs: map[string]string{
			"/data": "64m",
			"/tmp":  "16m",
		},
		// The password goes into a config file on the tmpfs through the
		// shell's own printf, never into an argument.
		Cmd: []string{"/bin/sh", "-ec", `printf 'requirepass %s\nport 6379\nbind 0.0.0.0\nprotected-mode no\ndir /data\nsave ""\nappendonly no\n' "$(cat /run/forge-secrets/redis-password)" >/tmp/redis.conf
exec redis-server /tmp/redis.conf`},
	},
	Browser: {
		Service: Browser, Port: 9222, UID: 10001, PIDs: 512,
		DataDirs: map[string]string{
			"/tmp": "512m", // HOME and the profile
		},
		Env: []string{"HOME=/tmp", "XDG_CONFIG_HOME=/tmp/.config", "XDG_CACHE_HOME=/tmp/.cache"},
		// Headless chromium with DevTools on the container's loopback, and
		// socat relaying the attempt network's port 9222 to it (chromium
		// binds DevTools to loopback only in headless mode). --no-sandbox:
		// chromium's own sandbox needs user namespaces or a setuid helper,
		// which no-new-privileges and CapDrop ALL rule out; the container
		// is the boundary. DevTools answers /json only to a Host header
		// that is an IP address or localhost.
		Cmd: []string{"/bin/sh", "-ec", `chromium --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --no-first-run \
  --remote-debugging-address=127.0.0.1 --remote-debugging-port=9223 --user-data-dir=/tmp/profile about:blank >/dev/null 2>&1 &
exec socat TCP-LISTEN:9222,fork,reuseaddr TCP:127.0.0.1:9223`},
	},
}

// DefinitionFor returns the definition of a service forged can run.
func DefinitionFor(service string) (Definition, bool) {
	d, ok := definitions[service]
	return d, ok
}

// NewPassword returns a fresh random password (32 bytes, base64url).
func NewPassword() (string, error) {
	b := make([]byte, passwordBytes)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("service password: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

// Attempt is what an attempt's services share. The attempt's secrets
// volume is not among it: it holds the provider credential and every
// service's password, and no service mounts it.
type Attempt struct {
	Prefix       string // the attempt's name prefix, forge-<hex>
	Network      string
	Labels       map[string]string
	SecurityOpts []string
	// ServiceMemoryBytes is the dispatch's serviceMemoryLimitBytes, split
	// evenly between the services.
	ServiceMemoryBytes int64
	Count              int
}

// ContainerName is the service container's name.
func ContainerName(prefix, service string) string { return prefix + "-" + service }

// ProbeName is the readiness probe container's name.
func ProbeName(prefix, service string) string { return prefix + "-probe-" + service }

// SecretsVolumeName is the volume of service's own password: the only
// secret its container (and its readiness probe) mounts.
func SecretsVolumeName(prefix, service string) string { return prefix + "-secrets-" + service }

// SecretsVolume is d's own secrets volume in the attempt of prefix, ""
// for a service without credentials.
func (d Definition) SecretsVolume(prefix string) string {
	if d.SecretFile == "" {
		return ""
	}
	return SecretsVolumeName(prefix, d.Service)
}

// SecretsHelperName is the secrets helper container's name.
func SecretsHelperName(prefix string) string { return prefix + "-secrets-init" }

// ContainerSpec returns the hardened service container of d, created from
// the pinned image id.
func (d Definition) ContainerSpec(a Attempt, imageID string) dockerops.ServiceSpec {
	tmpfs := make(map[string]string, len(d.DataDirs))
	for dir, size := range d.DataDirs {
		tmpfs[dir] = fmt.Sprintf("rw,nosuid,nodev,noexec,size=%s,uid=%d,gid=%d,mode=0700", size, d.UID, d.UID)
	}
	memory := a.ServiceMemoryBytes
	if a.Count > 1 {
		memory /= int64(a.Count)
	}
	return dockerops.ServiceSpec{
		Name:          ContainerName(a.Prefix, d.Service),
		Image:         imageID,
		Network:       a.Network,
		Alias:         d.Service,
		User:          fmt.Sprintf("%d:%d", d.UID, d.UID),
		Cmd:           d.Cmd,
		Env:           append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LC_ALL=C"}, d.Env...),
		Labels:        a.Labels,
		Tmpfs:         tmpfs,
		SecretsVolume: d.SecretsVolume(a.Prefix),
		MemoryBytes:   memory,
		NanoCPUs:      serviceNanoCPUs,
		PIDs:          d.PIDs,
		CapAdd:        d.Caps,
		SecurityOpts:  a.SecurityOpts,
	}
}

// Endpoint is the connection details the worker gets.
func (d Definition) Endpoint() messages.ServiceEndpoint {
	return messages.ServiceEndpoint{
		Type: d.Service, Host: d.Service, Port: d.Port, User: d.User, Database: d.Database,
		PasswordFile: d.secretPath(),
	}
}

// ProbeArgs are the arguments of `forged-worker worker probe` for d, run in a
// probe container on the attempt network; within is its own cap.
func (d Definition) ProbeArgs(binary string, within string) []string {
	return []string{binary, "worker", "probe",
		"--service", d.Service, "--host", d.Service, "--port", strconv.Itoa(d.Port),
		"--user", d.User, "--database", d.Database, "--password-file", d.secretPath(),
		"--within", within}
}
