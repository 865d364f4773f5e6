// Package example creates, with nothing from the internet, everything the
// README's main command needs to run one sandbox attempt end to end: a
// busybox base image built locally from Debian's busybox-static, a sample
// git repository with a .forge/ contract and Dockerfile, and a dispatch
// whose task changes a file.
package example

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"github.com/forgedev/forged/internal/kit/ids"
	"os"
	"path/filepath"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/messages"
)

// BaseImage is the tag of the locally built busybox base image.
const BaseImage = "forged-example/busybox:1"

// Branch is the managed branch the example's attempt works on.
const Branch = "forge/example-task"

// BuildBaseImage builds BaseImage FROM scratch with a static busybox (Debian
// package busybox-static) and its applet links. It needs no registry.
func BuildBaseImage(ctx context.Context, docker *dockerops.Client, busybox string) (string, error) {
	if id, found, err := docker.ImageID(ctx, BaseImage); err != nil {
		return "", err
	} else if found {
		return id, nil
	}
	bin, err := os.ReadFile(busybox)
	if err != nil {
		return "", fmt.Errorf("read %s (install Debian's busybox-static): %w", busybox, err)
	}
	dockerfile := "FROM scratch\nCOPY busybox /bin/busybox\nRUN [\"/bin/busybox\", \"--install\", \"-s\", \"/bin\"]\nENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range []struct {
		name string
		mode int64
		data []byte
	}{{"Dockerfile", 0o644, []byte(dockerfile)}, {"busybox", 0o755, bin}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.data)), ModTime: time.Unix(0, 0)}); err != nil {
			return "", err
		}
		if _, err := tw.Write(f.data); err != nil {
			return "", err
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return docker.BuildImage(ctx, dockerops.BuildRequest{ContextTar: &buf, Dockerfile: "Dockerfile", Tags: []string{BaseImage}})
}

// RepoOptions shape the sample repository.
type RepoOptions struct {
	// Dockerfile overrides the project Dockerfile (default: FROM BaseImage).
	Dockerfile string
	// Contract overrides .forge/forge.sandbox.yml.
	Contract string
}

// CreateRepo initialises a git repository at dir with a main branch holding
// a README, the contract and the Dockerfile, using the host's git.
func CreateRepo(ctx context.Context, dir string, opts RepoOptions) error {
	if opts.Dockerfile == "" {
		opts.Dockerfile = "FROM " + BaseImage + "\nLABEL dev.forge.example=true\n"
	}
	if opts.Contract == "" {
		opts.Contract = "version: 1\nworkingDirectory: /workspace\nservices: []\ncaches: []\n"
	}
	files := map[string]string{
		"README.md":                "# sample project\n\nA repository prepared by `forged example`.\n",
		".forge/forge.sandbox.yml": opts.Contract,
		".forge/Dockerfile":        opts.Dockerfile,
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			return err
		}
	}
	git := gitops.NewRunner()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"-c", "user.name=forged example", "-c", "user.email=example@forge.invalid", "commit", "-q", "-m", "sample project with a forge sandbox contract"},
	} {
		if _, err := git.Run(ctx, dir, gitops.RunOpts{Timeout: time.Minute}, args...); err != nil {
			return fmt.Errorf("sample repository: %w", err)
		}
	}
	return nil
}

// The sample dispatch's worker resources. They fit a real toolchain's
// build and test run: in package toolchains, the Go, Node, Python, Rust
// and C projects' own suites pass within them, the largest peak being
// Rust's at about 235 MiB, with under 40 tasks, on two cores. Compilers run
// a process or thread per core, and every thread counts against the PID
// limit.
const (
	DefaultMemoryBytes = 1 << 30
	DefaultPIDs        = 1024
)

// DispatchOptions shape the sample dispatch.
type DispatchOptions struct {
	// RunnerID is the runner that will run the dispatch (its state root's
	// runner id); empty means a fresh random id, which a runner refuses.
	RunnerID string
	RepoPath string
	Argv     []string
	// MemoryBytes is the worker memory limit (default DefaultMemoryBytes).
	MemoryBytes int64
	Lease       time.Duration
	Timeout     int
	// Project is the repository name, which labels the images built for
	// it (default "sample").
	Project string
}

// NewDispatch returns a dispatch for the sample repository with fresh ids.
func NewDispatch(opts DispatchOptions) (*messages.Dispatch, error) {
	if len(opts.Argv) == 0 {
		opts.Argv = []string{"/bin/sh", "-c", "echo 'hello from the sandbox' > hello.txt && echo \"task ran as $(id -u):$(id -g)\""}
	}
	if opts.MemoryBytes == 0 {
		opts.MemoryBytes = DefaultMemoryBytes
	}
	if opts.Lease == 0 {
		opts.Lease = time.Hour
	}
	if opts.RunnerID == "" {
		opts.RunnerID = NewUUID()
	}
	if opts.Project == "" {
		opts.Project = "sample"
	}
	d := &messages.Dispatch{
		Session:    messages.SessionRef{ID: NewUUID()},
		Execution:  messages.ExecutionRef{RunnerID: opts.RunnerID},
		Repo:       messages.RepoRef{Name: opts.Project, LocalPath: opts.RepoPath, DefaultBranch: "main"},
		BaseBranch: "main",
		Lease:      messages.Lease{WorktreeKey: Branch, ExpiresAt: time.Now().Add(opts.Lease).UTC().Truncate(time.Second), FencingToken: NewUUID()},
		Sandbox: messages.SandboxSpec{
			DispatchAttemptID: NewUUID(),
			ExecutionLeaseID:  NewUUID(),
			RunnerInstanceID:  NewUUID(),
			ExecutionPolicy:   messages.PolicyAdoption,
			NetworkPolicy:     messages.NetworkPolicy{Mode: messages.NetworkNone},
			RequestedResources: messages.RequestedResources{
				WorkerMemoryLimitBytes: opts.MemoryBytes,
				CPUMillis:              1000,
				PIDs:                   DefaultPIDs,
				RuntimeOverheadBytes:   128 << 20,
			},
			PublicationMode: messages.PublicationNone,
		},
		Task: messages.Task{Argv: opts.Argv, TimeoutSeconds: opts.Timeout},
	}
	return d, d.Validate()
}

// WriteDispatch writes d as indented JSON.
func WriteDispatch(path string, d *messages.Dispatch) error {
	raw, err := json.MarshalIndent(d, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(raw, '\n'), 0o600)
}

// NewUUID returns a random (version 4) UUID in lowercase.
func NewUUID() string { return ids.NewUUID() }

// SmallHostCapacity is the admission policy for small test machines (two
// cores are common): no core is kept for the host, an attempt needs 500
// CPU millis, and the worker memory matches the example's dispatch.
func SmallHostCapacity() preflight.CapacityPolicy {
	return preflight.CapacityPolicy{HostReservedCores: -1, CPUMillisPerAttempt: 500, WorkerMemoryBytes: DefaultMemoryBytes, HostReserveBytes: 512 << 20}
}
