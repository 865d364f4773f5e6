// Package providerauth prepares a coding agent's model-provider
// credentials for one attempt, as the seed's provider auth adapters do.
//
// The operator configures one adapter per provider: a helper program
// (--provider-auth PROVIDER=/abs/path). For an attempt whose dispatch names
// execution.provider and execution.authKind, forged runs the provider's
// helper directly (no shell, its own process group, a fixed minimal
// environment, a timeout) in an empty private directory that is its working
// directory, with the request on its stdin. The helper writes the
// credential files there. forged reads them back (flat, regular files
// only, bounded), and the attempt copies them into its secrets volume,
// which the worker mounts read-only at /run/forge-secrets. The directory is
// removed as soon as it is read. The helper's output is discarded: it may
// hold anything, the secret included. Nothing of the files reaches an
// environment variable, a log, an event, a ledger or an argument.
package providerauth

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/procgroup"
)

// Bounds of what a helper may leave.
const (
	MaxFiles      = 32
	MaxTotalBytes = 1 << 20
)

// DefaultTimeout bounds one helper run when none is configured.
const DefaultTimeout = 30 * time.Second

var providerName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// Request is what a helper reads on its stdin. It holds no secret.
type Request struct {
	Provider          string `json:"provider"`
	AuthKind          string `json:"authKind"`
	DispatchAttemptID string `json:"dispatchAttemptId"`
	RunnerInstanceID  string `json:"runnerInstanceId"`
}

// Adapters are the operator's helper per provider. The zero value serves
// no provider.
type Adapters struct {
	helpers map[string]string
	timeout time.Duration
}

// Parse builds the adapters from PROVIDER=/abs/path specs. Each helper
// must be a clean absolute path to an executable regular file, and each
// provider named once.
func Parse(specs []string, timeout time.Duration) (*Adapters, error) {
	a := &Adapters{helpers: map[string]string{}, timeout: timeout}
	for _, spec := range specs {
		provider, path, ok := strings.Cut(spec, "=")
		switch {
		case !ok || !providerName.MatchString(provider):
			return nil, fmt.Errorf("provider auth %q: want PROVIDER=/absolute/helper with PROVIDER of [a-z0-9_-]", spec)
		case a.helpers[provider] != "":
			return nil, fmt.Errorf("provider auth: %s is configured twice", provider)
		}
		if err := procgroup.CheckExecutable("provider auth helper", path); err != nil {
			return nil, err
		}
		a.helpers[provider] = path
	}
	return a, nil
}

// Check refuses, with failure.SandboxAuthUnavailable, a provider no
// adapter serves. It is asked before anything of the attempt exists.
func (a *Adapters) Check(provider, authKind string) error {
	if a == nil || a.helpers[provider] == "" {
		return failure.New(failure.SandboxAuthUnavailable, "no provider auth adapter is configured for provider %q (auth kind %q)", provider, authKind)
	}
	return nil
}

// Prepare runs the provider's helper in dir (created empty, 0700; it must
// not exist) and returns the files it left there. dir is removed before
// Prepare returns, whatever happened. Every failure is
// failure.SandboxAuthUnavailable with a message that names what happened,
// never what the helper printed or wrote.
func (a *Adapters) Prepare(ctx context.Context, dir string, req Request) ([]dockerops.VolumeFile, error) {
	if err := a.Check(req.Provider, req.AuthKind); err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, failure.Wrap(failure.SandboxAuthUnavailable, err, "provider auth: create the credentials directory")
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxAuthUnavailable, err, "provider auth: encode the request")
	}
	if err := a.run(ctx, a.helpers[req.Provider], dir, body); err != nil {
		return nil, err
	}
	return readFiles(dir)
}

func (a *Adapters) run(ctx context.Context, helper, dir string, stdin []byte) error {
	timeout := a.timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	runCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(runCtx, helper)
	cmd.Args = []string{helper}
	// Its whole environment: FORGE_CREDENTIALS_DIR (its working
	// directory) beside procgroup's fixed helper environment.
	cmd.Env = procgroup.HelperEnv("FORGE_CREDENTIALS_DIR=" + dir)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(stdin)
	cmd.Stdout, cmd.Stderr = nil, nil // discarded: they may hold anything, the secret included
	err := procgroup.RunHelper(cmd)
	if err == nil {
		return nil
	}
	refuse := func(format string, args ...any) error {
		return failure.WrapWithheld(failure.SandboxAuthUnavailable, err, "provider auth helper "+format, args...)
	}
	var exit *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return refuse("cancelled: %v", ctx.Err())
	case errors.Is(runCtx.Err(), context.DeadlineExceeded):
		return refuse("timed out after %s", timeout)
	case errors.As(err, &exit):
		return refuse("failed: %s", procgroup.DescribeExit(exit))
	default:
		return refuse("could not run")
	}
}

// readFiles reads what the helper left: flat regular files only (no
// directory, link or device), named for a volume, at most MaxFiles and
// MaxTotalBytes, opened without following links.
func readFiles(dir string) ([]dockerops.VolumeFile, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxAuthUnavailable, err, "provider auth: read the credentials directory")
	}
	if len(entries) == 0 {
		return nil, failure.New(failure.SandboxAuthUnavailable, "provider auth helper wrote no credential file")
	}
	if len(entries) > MaxFiles {
		return nil, failure.New(failure.SandboxAuthUnavailable, "provider auth helper wrote %d entries, more than %d", len(entries), MaxFiles)
	}
	var files []dockerops.VolumeFile
	total := 0
	for _, e := range entries {
		name := e.Name()
		if !dockerops.ValidVolumeFileName(name) {
			return nil, failure.New(failure.SandboxAuthUnavailable, "provider auth helper wrote an entry whose name is not 1-128 characters of [A-Za-z0-9._-]")
		}
		if !e.Type().IsRegular() {
			return nil, failure.New(failure.SandboxAuthUnavailable, "provider auth helper wrote %s, which is not a regular file", name)
		}
		content, err := readBounded(filepath.Join(dir, name), MaxTotalBytes-total)
		if err != nil {
			return nil, failure.WrapWithheld(failure.SandboxAuthUnavailable, err, "provider auth: read %s", name)
		}
		total += len(content)
		files = append(files, dockerops.VolumeFile{Name: name, Content: content})
	}
	return files, nil
}

var errTooLarge = errors.New("the credential files exceed the size bound")

// readBounded reads a regular file without following a link, refusing
// more than limit bytes.
func readBounded(path string, limit int) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, errors.New("not a regular file")
	}
	content, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(content) > limit {
		return nil, fmt.Errorf("%w (%d bytes)", errTooLarge, MaxTotalBytes)
	}
	return content, nil
}
