// Package contract parses and validates a repository's sandbox contract,
// `.forge/forge.sandbox.yml` at the approved config commit: the working
// directory the task runs in, the services it needs and its caches. A
// contract that does not validate is refused with
// failure.SandboxContractInvalid before any Docker resource exists.
package contract

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/forgedev/forged/failure"
)

// Path is where the contract lives in the config commit.
const Path = ".forge/forge.sandbox.yml"

// DockerfilePath is where the project Dockerfile lives in the config commit.
const DockerfilePath = ".forge/Dockerfile"

// MaxBytes bounds the contract source.
const MaxBytes = 64 * 1024

// Service types a contract may declare.
const (
	ServicePostgres = "postgres"
	ServiceRedis    = "redis"
	ServiceBrowser  = "browser"
)

// Cache modes: builder-managed read-only caches, or a volume private to
// one attempt.
const (
	CacheReadOnly   = "readonly"
	CachePerAttempt = "per_attempt"
)

// CacheTargets maps each known cache name to where it is mounted in the
// worker container. Each is a direct child of HOME (/home/forge, a tmpfs
// in the worker): the engine makes a nested mount point's missing parents
// root-owned, so the seed's deeper targets (~/.cache/pip,
// ~/.local/share/pnpm/store, ~/.nuget/packages, ~/.cargo/registry) would
// take ~/.cache, ~/.local/share and ~/.nuget (XDG_CACHE_HOME,
// XDG_DATA_HOME, NuGet's configuration) away from the task. The tools are
// pointed at these by their variables (package caches). npm's is the
// seed's own; cargo's is all of CARGO_HOME, whose registry/ the seed
// mounts.
var CacheTargets = map[string]string{
	"npm":   "/home/forge/.npm",
	"pnpm":  "/home/forge/.pnpm-store",
	"yarn":  "/home/forge/.yarn-cache",
	"nuget": "/home/forge/.nuget-packages",
	"cargo": "/home/forge/.cargo",
	"pip":   "/home/forge/.pip-cache",
}

// Contract is a validated sandbox contract.
type Contract struct {
	Version          int       `yaml:"version" json:"version"`
	WorkingDirectory string    `yaml:"workingDirectory" json:"workingDirectory"`
	Services         []Service `yaml:"services" json:"services"`
	Caches           []Cache   `yaml:"caches" json:"caches"`
}

// Service is one sidecar service the task needs.
type Service struct {
	Type string `yaml:"type" json:"type"`
}

// Cache is one package cache.
type Cache struct {
	Name string `yaml:"name" json:"name"`
	Mode string `yaml:"mode" json:"mode"`
}

// Parsed is a contract with the digest of its canonical form.
type Parsed struct {
	Contract Contract
	// Digest is "sha256:<hex>" over the canonical JSON of Contract, so
	// formatting and comments do not change it.
	Digest string
}

func invalid(format string, args ...any) error {
	return failure.New(failure.SandboxContractInvalid, format, args...)
}

// Parse strictly decodes and validates a contract source. Unknown keys,
// multiple documents, unknown services or caches, duplicate entries and a
// working directory outside /workspace are refused.
func Parse(source []byte) (*Parsed, error) {
	if len(source) > MaxBytes {
		return nil, invalid("%s exceeds %d bytes", Path, MaxBytes)
	}
	dec := yaml.NewDecoder(bytes.NewReader(source))
	dec.KnownFields(true)
	var c Contract
	if err := dec.Decode(&c); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, invalid("%s is empty", Path)
		}
		return nil, invalid("%s: %v", Path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, invalid("%s must hold exactly one YAML document", Path)
	}
	if err := c.validate(); err != nil {
		return nil, err
	}
	canonical, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("contract digest: %w", err)
	}
	sum := sha256.Sum256(canonical)
	return &Parsed{Contract: c, Digest: "sha256:" + hex.EncodeToString(sum[:])}, nil
}

func (c *Contract) validate() error {
	if c.Version != 1 {
		return invalid("version must be 1, got %d", c.Version)
	}
	if c.WorkingDirectory == "" {
		c.WorkingDirectory = "/workspace"
	}
	wd := c.WorkingDirectory
	if !path.IsAbs(wd) || path.Clean(wd) != wd || (wd != "/workspace" && !strings.HasPrefix(wd, "/workspace/")) {
		return invalid("workingDirectory must be a clean absolute path under /workspace, got %q", wd)
	}
	if strings.ContainsAny(wd, "\x00\r\n") || len(wd) > 512 {
		return invalid("workingDirectory is malformed")
	}
	if c.Services == nil {
		c.Services = []Service{}
	}
	if c.Caches == nil {
		c.Caches = []Cache{}
	}
	seenService := map[string]bool{}
	for i, s := range c.Services {
		switch s.Type {
		case ServicePostgres, ServiceRedis, ServiceBrowser:
		default:
			return invalid("services[%d].type %q is not one of postgres, redis, browser", i, s.Type)
		}
		if seenService[s.Type] {
			return invalid("services[%d].type %q is declared twice", i, s.Type)
		}
		seenService[s.Type] = true
	}
	seenCache := map[string]bool{}
	for i, cache := range c.Caches {
		if _, ok := CacheTargets[cache.Name]; !ok {
			return invalid("caches[%d].name %q is not a known cache", i, cache.Name)
		}
		if cache.Mode != CacheReadOnly && cache.Mode != CachePerAttempt {
			return invalid("caches[%d].mode must be %q or %q", i, CacheReadOnly, CachePerAttempt)
		}
		if seenCache[cache.Name] {
			return invalid("caches[%d].name %q is declared twice", i, cache.Name)
		}
		seenCache[cache.Name] = true
	}
	return nil
}

// ServiceTypes returns the declared services' types, in order.
func (c Contract) ServiceTypes() []string {
	out := make([]string, 0, len(c.Services))
	for _, s := range c.Services {
		out = append(out, s.Type)
	}
	return out
}

// PerAttemptCaches returns the names of the caches isolated to one attempt.
func (c Contract) PerAttemptCaches() []string {
	var names []string
	for _, cache := range c.Caches {
		if cache.Mode == CachePerAttempt {
			names = append(names, cache.Name)
		}
	}
	return names
}
