// Package dockerctx resolves the Docker engine endpoint the way the docker
// CLI does, so that forged talks to the engine an operator's `docker`
// talks to: DOCKER_CONTEXT, then DOCKER_HOST (the default context), then
// the current context of the CLI's configuration ($DOCKER_CONFIG or
// ~/.docker, config.json's currentContext), then the default context. A
// named context's endpoint is read from the CLI's context store
// (contexts/meta/<sha256 of the name>/meta.json) with its TLS material
// (contexts/tls/<same>/docker/{ca,cert,key}.pem) when present.
//
// Only the docker endpoint of a context is used; Kubernetes endpoints and
// the CLI's other settings are ignored.
package dockerctx

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/docker/docker/client"
)

// DefaultContext is the context of DOCKER_HOST or the default socket.
const DefaultContext = "default"

// maxMetaBytes bounds a context's meta.json and config.json.
const maxMetaBytes = 1 << 20

// Endpoint is a resolved engine endpoint.
type Endpoint struct {
	// Context is the context's name ("default" for DOCKER_HOST or the
	// default socket).
	Context string `json:"context"`
	// Host is the engine address; empty for the default context (the
	// client takes DOCKER_HOST or its default socket).
	Host string `json:"host,omitempty"`
	// TLSDir holds ca.pem, cert.pem and key.pem when the context has TLS
	// material.
	TLSDir        string `json:"tlsDir,omitempty"`
	SkipTLSVerify bool   `json:"skipTlsVerify,omitempty"`
}

// Resolve resolves the endpoint from the process's environment and the
// CLI's configuration directory.
func Resolve() (Endpoint, error) { return ResolveFrom(os.Getenv) }

// ResolveFrom resolves the endpoint with getenv for the environment.
func ResolveFrom(getenv func(string) string) (Endpoint, error) {
	name := getenv("DOCKER_CONTEXT")
	configDir, err := configDir(getenv)
	if name == "" && getenv("DOCKER_HOST") != "" {
		return Endpoint{Context: DefaultContext}, nil
	}
	if name == "" && err == nil {
		name, err = currentContext(configDir)
		if err != nil {
			return Endpoint{}, err
		}
	}
	if name == "" || name == DefaultContext {
		return Endpoint{Context: DefaultContext}, nil
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q: %w", name, err)
	}
	return readContext(configDir, name)
}

func configDir(getenv func(string) string) (string, error) {
	if dir := getenv("DOCKER_CONFIG"); dir != "" {
		return dir, nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errors.New("neither DOCKER_CONFIG nor HOME is set")
	}
	return filepath.Join(home, ".docker"), nil
}

// currentContext is config.json's currentContext ("" without one).
func currentContext(dir string) (string, error) {
	raw, err := readBounded(filepath.Join(dir, "config.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("docker CLI configuration: %w", err)
	}
	var cfg struct {
		CurrentContext string `json:"currentContext"`
	}
	if err := json.Unmarshal(raw, &cfg); err != nil {
		return "", fmt.Errorf("docker CLI configuration %s: %w", filepath.Join(dir, "config.json"), err)
	}
	return cfg.CurrentContext, nil
}

// contextID is the store's directory name of a context.
func contextID(name string) string {
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:])
}

func readContext(dir, name string) (Endpoint, error) {
	id := contextID(name)
	raw, err := readBounded(filepath.Join(dir, "contexts", "meta", id, "meta.json"))
	if errors.Is(err, fs.ErrNotExist) {
		return Endpoint{}, fmt.Errorf("docker context %q not found in %s", name, filepath.Join(dir, "contexts"))
	}
	if err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q: %w", name, err)
	}
	var meta struct {
		Name      string `json:"Name"`
		Endpoints map[string]struct {
			Host          string `json:"Host"`
			SkipTLSVerify bool   `json:"SkipTLSVerify"`
		} `json:"Endpoints"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		return Endpoint{}, fmt.Errorf("docker context %q: %w", name, err)
	}
	docker, ok := meta.Endpoints["docker"]
	if meta.Name != name || !ok || docker.Host == "" {
		return Endpoint{}, fmt.Errorf("docker context %q has no docker endpoint", name)
	}
	ep := Endpoint{Context: name, Host: docker.Host, SkipTLSVerify: docker.SkipTLSVerify}
	tls := filepath.Join(dir, "contexts", "tls", id, "docker")
	if _, err := os.Stat(filepath.Join(tls, "ca.pem")); err == nil {
		ep.TLSDir = tls
	}
	return ep, nil
}

func readBounded(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	raw, err := io.ReadAll(io.LimitReader(f, maxMetaBytes+1))
	if err != nil {
		return nil, err
	}
	if len(raw) > maxMetaBytes {
		return nil, fmt.Errorf("%s exceeds %d bytes", path, maxMetaBytes)
	}
	return raw, nil
}

// ClientOpts are the engine client options of the endpoint, to append
// after client.FromEnv (they override DOCKER_HOST for a named context).
func (e Endpoint) ClientOpts() []client.Opt {
	if e.Host == "" {
		return nil
	}
	opts := []client.Opt{client.WithHost(e.Host)}
	if e.TLSDir != "" {
		opts = append(opts, client.WithTLSClientConfig(filepath.Join(e.TLSDir, "ca.pem"),
			filepath.Join(e.TLSDir, "cert.pem"), filepath.Join(e.TLSDir, "key.pem")))
	}
	return opts
}
