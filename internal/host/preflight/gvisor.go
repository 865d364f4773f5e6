package preflight

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/distribution/reference"
	"github.com/docker/docker/api/types/system"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// The isolation tier's defaults.
const (
	// DefaultGVisorRuntime is the name gVisor's runsc is registered under
	// in the engine (scripts/ensure-runsc.sh, docs/gvisor.md).
	DefaultGVisorRuntime = "runsc"
	// DefaultGVisorNetworkRuntime is runsc's second registration, with
	// its own network stack (netstack) through scripts/runsc-netns: the
	// workers of attempts with services or public_allowlist run under it.
	DefaultGVisorNetworkRuntime = "runsc-net"
	// DefaultGVisorProbeImage is the image the probe container runs: the
	// example's busybox image (scripts/example.sh builds it), whose dmesg
	// prints the sandbox kernel's banner.
	DefaultGVisorProbeImage = "forged-example/busybox:1"
	// gVisorBanner is the first line gVisor's kernel logs; runc's
	// containers see the host's kernel log (or none).
	gVisorBanner = "Starting gVisor"
)

// IsolationFacts is messages.IsolationFacts (the wire type lives there).
type IsolationFacts = messages.IsolationFacts

// GVisorFacts is messages.GVisorFacts (the wire type lives there).
type GVisorFacts = messages.GVisorFacts

// SandboxIsolationUnavailable: the isolation floor is gvisor and runsc is
// missing or its probe failed.
var SandboxIsolationUnavailable = failure.SandboxIsolationUnavailable

// RuntimeProbe is what one probe container printed (its kernel log) and
// how long it took from create to exit; Err is why it did not run.
type RuntimeProbe struct {
	KernelLog string
	Elapsed   time.Duration
	Err       error
}

// RuntimeProber runs a throwaway, network-less container from image under
// the engine's OCI runtime named runtime, and returns its kernel log
// (dmesg); *dockerops.Client is one. The container is removed whatever
// happens.
type RuntimeProber interface {
	ProbeRuntime(ctx context.Context, runtime, image string) RuntimeProbe
}

// ValidIsolation reports whether floor is an isolation floor forged knows.
func ValidIsolation(floor string) bool {
	return floor == messages.IsolationRunc || floor == messages.IsolationGVisor
}

// maxProbeImageBytes bounds a probe image's reference.
const maxProbeImageBytes = 255

// CheckProbeImage refuses a gVisor probe image (Options.GVisorProbeImage)
// that the engine cannot name: it must be an image reference
// (name[:tag][@digest]) or an image id (sha256:<64 hex>).
func CheckProbeImage(ref string) error {
	if ref == "" || len(ref) > maxProbeImageBytes {
		return fmt.Errorf("the probe image %q is empty or longer than %d bytes", text.Ellipsis(ref, 64), maxProbeImageBytes)
	}
	if _, err := reference.ParseAnyReference(ref); err != nil {
		return fmt.Errorf("the probe image %q is not an image reference or id: %v", text.Ellipsis(ref, 64), err)
	}
	return nil
}

// isolationFacts lists the engine's runtimes and, when the floor is
// gvisor or Options.ProbeGVisor is set, probes runsc and its network
// registration (each cached for IsolationTTL per engine and
// registration); c.mu is held.
func (c *Checker) isolationFacts(ctx context.Context, info system.Info, engineID string) IsolationFacts {
	f := IsolationFacts{Floor: c.opts.IsolationFloor, Runtimes: make([]string, 0, len(info.Runtimes))}
	for name := range info.Runtimes {
		f.Runtimes = append(f.Runtimes, name)
	}
	slices.Sort(f.Runtimes)
	f.GVisor = c.runtimeFacts(ctx, info, f, engineID, c.opts.GVisorRuntime, &c.gvisor)
	f.GVisorNetwork = c.runtimeFacts(ctx, info, f, engineID, c.opts.GVisorNetworkRuntime, &c.gvisorNet)
	return f
}

// runtimeProbeCache is the last probe of one runtime, for the engine and
// registration in key.
type runtimeProbeCache struct {
	facts GVisorFacts
	key   string
	at    time.Time
}

// runtimeFacts is what the engine registers under name and, under the
// gvisor floor, what its probe found (cached in cache).
func (c *Checker) runtimeFacts(ctx context.Context, info system.Info, f IsolationFacts, engineID, name string, cache *runtimeProbeCache) GVisorFacts {
	g := GVisorFacts{Runtime: name}
	rt, ok := info.Runtimes[name]
	if !ok {
		g.Reason = fmt.Sprintf("the engine registers no runtime %q (it has %s); install and register runsc (docs/gvisor.md)", name, strings.Join(f.Runtimes, ", "))
		return g
	}
	g.Registered, g.Path, g.Args = true, rt.Path, slices.Clone(rt.Args)
	g.Platform = platformArg(rt.Args)
	if f.Floor != messages.IsolationGVisor && !c.opts.ProbeGVisor {
		// Only a host that runs some workers under gVisor depends on the
		// runtime: a runc host that offers gVisor to no dispatch reports
		// the registration without running a probe container at every
		// start (`forged preflight --isolation gvisor` probes it).
		g.Reason = "not probed: the isolation floor is runc and gVisor is offered to no dispatch (--allow-gvisor-dispatch, --sandbox-required-isolation)"
		return g
	}
	key := engineID + "\x00" + name + "\x00" + rt.Path + "\x00" + strings.Join(rt.Args, "\x00")
	now := c.now()
	if cache.key != key || cache.at.IsZero() || now.Sub(cache.at) >= c.opts.IsolationTTL {
		probed := c.probeGVisor(ctx, g)
		if ctx.Err() != nil {
			// Cut short by the caller: it says nothing about the runtime.
			return probed
		}
		*cache = runtimeProbeCache{facts: probed, key: key, at: now}
	}
	return cache.facts
}

// probeGVisor runs the probe container and asks the runtime binary its
// version (local engines only: the binary is on this host).
func (c *Checker) probeGVisor(ctx context.Context, g GVisorFacts) GVisorFacts {
	g.ProbedAt = c.now().UTC()
	if c.localEngine() && filepath.IsAbs(g.Path) {
		g.Version = runtimeVersion(ctx, g.Path, c.opts.CallTimeout)
	}
	if c.opts.Runtimes == nil {
		g.Reason = "no runtime prober is configured"
		return g
	}
	probeCtx, cancel := context.WithTimeout(ctx, 4*c.opts.CallTimeout)
	defer cancel()
	p := c.opts.Runtimes.ProbeRuntime(probeCtx, g.Runtime, c.opts.GVisorProbeImage)
	g.ProbeMillis = p.Elapsed.Milliseconds()
	switch {
	case p.Err != nil:
		g.Reason = fmt.Sprintf("the probe container (image %s) did not run under %s: %v", c.opts.GVisorProbeImage, g.Runtime, p.Err)
	case !strings.Contains(p.KernelLog, gVisorBanner):
		g.Reason = fmt.Sprintf("the probe container ran under %s but its kernel is not gVisor's (no %q in its kernel log)", g.Runtime, gVisorBanner)
	default:
		g.Works = true
	}
	return g
}

// platformArg is the value of --platform in a runtime's arguments.
func platformArg(args []string) string {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, "--platform="); ok {
			return v
		}
		if a == "--platform" && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// runtimeVersion runs `path --version` and returns what follows
// "version " on its first line ("" when it cannot tell).
func runtimeVersion(ctx context.Context, path string, timeout time.Duration) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--version").Output()
	if err != nil {
		return ""
	}
	line, _, _ := strings.Cut(string(out), "\n")
	if _, v, ok := strings.Cut(line, "version "); ok {
		return strings.TrimSpace(v)
	}
	return strings.TrimSpace(line)
}

// isolationRefusal is the report's code and reason when the floor is
// gvisor and gVisor does not work; "" otherwise.
func isolationRefusal(f IsolationFacts) (failure.Code, string) {
	if f.Floor != messages.IsolationGVisor || f.GVisor.Works {
		return "", ""
	}
	return SandboxIsolationUnavailable, fmt.Sprintf("the isolation floor is gvisor (--isolation) but runtime %q does not work: %s", f.GVisor.Runtime, f.GVisor.Reason)
}
