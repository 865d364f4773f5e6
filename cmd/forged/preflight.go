package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/kit/termsafe"
)

func preflightCommand() *cobra.Command {
	var (
		asJSON    bool
		maxSlots  int
		stateRoot string
		admission preflightFlags
	)
	cmd := &cobra.Command{
		Use:   "preflight",
		Short: "Check the Docker engine and this host, and print how many attempts they admit",
		Long: "Ask the Docker engine (Engine API) and this host whether sandbox attempts may run, and how many at once.\n" +
			"Exit status: 0 available, 1 unavailable (the code says why), 2 set-up error.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := admission.validate(); err != nil {
				fmt.Fprintln(os.Stderr, "forged:", err)
				return exitError{2}
			}
			cli, err := preflight.NewEngineClient("")
			if err != nil {
				fmt.Fprintln(os.Stderr, "forged: docker client:", err)
				return exitError{2}
			}
			defer cli.Close()
			catalogue, err := admission.services()
			if err != nil {
				fmt.Fprintln(os.Stderr, "forged:", err)
				return exitError{2}
			}
			opts := preflight.Options{
				AllowRootful:     admission.allowRootful,
				Endpoint:         cli.DaemonHost(),
				StateRoot:        stateRoot,
				Capacity:         admission.policy(maxSlots),
				Disk:             admission.disk(),
				IsolationFloor:   admission.isolation,
				ProbeGVisor:      admission.offersGVisor(),
				GVisorProbeImage: admission.gvisorProbeImage,
				SeccompProfile:   admission.seccompProfile,
				LSMOption:        admission.lsmOption,

				AllowDockerDesktop: admission.allowDesktop,
			}
			// The isolation probe needs a full client; without one the
			// report says isolation is not verified.
			if docker, err := dockerops.Connect(cmd.Context(), dockerops.Options{}); err == nil {
				defer docker.Close()
				opts.Isolation = docker
				opts.Runtimes = docker
				opts.Services = runner.ServiceCheck(catalogue, docker)
			}
			checker := preflight.NewChecker(cli, nil, opts)
			r := checker.Check(cmd.Context())
			if asJSON {
				enc := json.NewEncoder(os.Stdout)
				enc.SetIndent("", "  ")
				if err := enc.Encode(r); err != nil {
					return err
				}
			} else if err := printPreflight(os.Stdout, r); err != nil {
				return err
			}
			if !r.Available {
				return exitError{1}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the report as JSON")
	admission.register(cmd)
	cmd.Flags().IntVar(&maxSlots, "max-slots", 3, "configured maximum of concurrent attempts")
	cmd.Flags().StringVar(&stateRoot, "state-root", defaultStateRoot(), "forged's state directory (measured when the Docker root directory cannot be)")
	return cmd
}

// defaultStateRoot matches the --state-root default of run and daemon.
func defaultStateRoot() string {
	if dir, err := os.UserCacheDir(); err == nil {
		return filepath.Join(dir, "forged")
	}
	return filepath.Join(os.TempDir(), "forged-state")
}

// printPreflight renders r as a two-column table.
func printPreflight(w io.Writer, r preflight.Report) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	// Engine facts come from the engine: escaped like any untrusted text.
	row := func(key, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", key, termsafe.String(fmt.Sprintf(format, args...)))
	}
	yes := func(b bool) string {
		if b {
			return "yes"
		}
		return "no"
	}
	if r.Available {
		row("status", "available: %d of at most %d slots", r.Capacity, r.MaxSlots)
	} else {
		row("status", "unavailable: %s", r.Code)
		row("reason", "%s", r.Reason)
	}
	row("maintenance", "%s", map[bool]string{true: "allowed", false: "refused"}[r.MaintenanceAllowed()])
	row("platform", "%s/%s (supported: %s)", r.Platform.OS, r.Platform.Arch, yes(r.Platform.Supported))
	e := r.Engine
	if !e.Reachable {
		row("engine", "unreachable at %s", e.Endpoint)
		return tw.Flush()
	}
	row("engine", "docker %s, API %s (min %s), %s daemon at %s", e.ServerVersion, e.APIVersion, e.MinAPIVersion, e.OSType, e.Endpoint)
	row("engine host", "%s, kernel %s, %s, %d CPUs, %s", e.OperatingSystem, e.KernelVersion, e.Architecture, e.NCPU, gibText(e.MemTotalBytes))
	f := r.Features
	mode := "rootless"
	if !f.Rootless {
		mode = "rootful"
		if !r.RootlessRequired {
			mode += " (accepted: --allow-rootful, the default)"
		}
	}
	lsm := strings.Join(f.LSM, ", ")
	if lsm == "" {
		lsm = "none"
	}
	row("isolation", "%s, user namespaces %s, cgroup v%s (%s), seccomp %s, LSM %s", mode, yes(f.UserNamespaces), f.CgroupVersion, f.CgroupDriver, yes(f.Seccomp), lsm)
	row("security profile", "%s (--seccomp-profile and --lsm set, and enforced by the engine)", yes(f.SecurityProfile))
	n := r.Network
	row("network", "attempts without services or egress: %s (loopback only)", n.DefaultMode)
	if n.Isolation.Verified {
		row("attempt networks", "isolated: %s (verified)", n.Isolation.Mechanism)
	} else {
		row("attempt networks", "refused (%s): %s", n.Code, n.Isolation.Reason)
	}
	row("dns", "internal-network forwarding fixed (CVE-2024-29018): %s; %s", yes(n.DNS.InternalForwardingFixed), n.DNS.Note)
	row("storage", "%s, project quota %s, Docker root %s", f.StorageDriver, yes(f.StorageQuota), e.DockerRootDir)
	if r.Storage.Bounded() {
		row("volumes", "bounded by %s", r.Storage.Mechanism)
	} else {
		row("volumes", "not bounded: %s", r.Storage.Reason)
	}
	switch k := r.KernelFacts; {
	case k.Counters && k.Filesystems:
		row("kernel facts", "cgroup counters and sandbox file systems readable")
	case k.Reason != "":
		row("kernel facts", "best-effort: %s", k.Reason)
	}
	iso, g := r.Isolation, r.Isolation.GVisor
	row("runtimes", "%s; isolation floor %s", strings.Join(iso.Runtimes, ", "), iso.Floor)
	switch {
	case g.Works:
		row("gvisor", "%s works: version %s, platform %s, probe %d ms (attempts without a network)", g.Runtime, g.Version, g.Platform, g.ProbeMillis)
	default:
		row("gvisor", "%s does not work: %s", g.Runtime, g.Reason)
	}
	switch gn := iso.GVisorNetwork; {
	case gn.Works:
		row("gvisor network", "%s works: platform %s, probe %d ms (attempts with services or public_allowlist; open_public is refused)", gn.Runtime, gn.Platform, gn.ProbeMillis)
	default:
		row("gvisor network", "%s does not work: %s", gn.Runtime, gn.Reason)
	}
	row("build", "classic builder %s, BuildKit default %s", yes(f.ClassicBuilder), yes(f.BuildKit))
	d := r.Disk
	row("disk", "%s: %s free of %s, %.1f%% used, low %s (low below %s free or at %.0f%%, recovers at %.0f%%)",
		d.Path, gibText(d.FreeBytes), gibText(d.TotalBytes), d.UsedRatio*100, yes(d.Low), gibText(d.MinimumFreeBytes), d.HighWatermark*100, d.LowWatermark*100)
	m := r.Memory
	row("memory", "%s available, %s reserved for the host, %s per attempt: %d slots", gibText(m.AvailableBytes), gibText(m.ReserveBytes), gibText(m.PerAttemptBytes), m.Slots)
	c := r.CPU
	row("cpu", "%d cores, %d kept for the host, %d millis per attempt: %d slots", c.Cores, c.ReservedCores, c.MillisPerAttempt, c.Slots)
	if ds := r.DiskSlots; ds.Slots >= 0 {
		row("disk slots", "%s: %s free, %s reserved, %s per attempt (workspace and control images): %d slots",
			ds.Path, gibText(ds.FreeBytes), gibText(ds.ReserveBytes), gibText(ds.PerAttemptBytes), ds.Slots)
		row("capacity", "%d (min of max %d, cpu %d, memory %d, disk %d)", r.Capacity, r.MaxSlots, c.Slots, m.Slots, ds.Slots)
	} else {
		row("capacity", "%d (min of max %d, cpu %d, memory %d)", r.Capacity, r.MaxSlots, c.Slots, m.Slots)
	}
	for _, s := range r.Services {
		row("service "+s.Service, "%s %s (pinned %s) %s", s.State, s.Ref, s.ImageID, s.Detail)
	}
	return tw.Flush()
}

func gibText(n int64) string { return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30)) }
