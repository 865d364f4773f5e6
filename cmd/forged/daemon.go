package main

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/daemon/httpapi"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/bearer"
)

func daemonCommand() *cobra.Command {
	var flags runnerFlags
	var socket string
	var metricsFlags metricsListenFlags
	var manageTokenFile string
	var allowUIDs []uint
	var allowedHosts []string
	var onStop string
	var gc runner.ImageGCConfig
	imageGC := true
	var fleetSettings fleetFlags
	cmd := &cobra.Command{
		Use:   "daemon",
		Short: "Serve the forged HTTP API on a unix socket",
		RunE: func(cmd *cobra.Command, _ []string) error {
			if fleetSettings.enabled() && !fleetLinked {
				// Before anything starts: the fleet build runs it.
				return execFleetBuild()
			}
			logger := newLogger(flags.logLevel())
			ctx, stop := interruptible(cmd, 0)
			defer stop()
			if onStop != onStopDrain && onStop != onStopDetach {
				return fmt.Errorf("--on-stop %q is neither %s nor %s: set --on-stop (FORGED_ON_STOP, onStop) to one of them", onStop, onStopDrain, onStopDetach)
			}
			cfg, err := flags.config(logger)
			if err != nil {
				return err
			}
			if err := flags.publish.apply(&cfg); err != nil {
				return err
			}
			if imageGC {
				cfg.ImageGC = &gc
			}
			if cfg.Services, err = flags.preflight.services(); err != nil {
				return err
			}
			for _, h := range allowedHosts {
				if !httpapi.ValidHostName(h) {
					return fmt.Errorf("config: apiAllowedHost %q: name a host name or an IP address, without a port", h)
				}
			}
			if len(cfg.RepoRoots) == 0 {
				logger.Warn("no --repo-root: a dispatch may name any repository forged can read; set the roots your repositories live under")
			}
			manageToken := ""
			if manageTokenFile != "" {
				token, err := bearer.ReadTokenFile(manageTokenFile)
				if err != nil {
					return fmt.Errorf("config: consoleManageTokenFile: %w", err)
				}
				manageToken = token
			}
			metricsListener, metricsToken, err := metricsFlags.listen()
			if err != nil {
				return err
			}
			if metricsListener != nil {
				defer metricsListener.Close()
			}
			cfg.Readopt = true
			membership, err := fleetSettings.prepareDaemon(&cfg, logger)
			if err != nil {
				return err
			}
			r, err := runner.New(ctx, cfg)
			if err != nil {
				return err
			}
			detached := false
			defer func() {
				if !detached {
					_ = r.Close()
				}
			}()
			served, err := membership.join(r, logger)
			defer membership.leave()
			if err != nil {
				return err
			}
			var metricsDone chan error
			if metricsListener != nil {
				metricsDone = make(chan error, 1)
				go func() {
					metricsDone <- httpapi.Serve(ctx, metricsListener, r.Metrics().TCPHandler(metricsToken), 5*time.Second)
				}()
				logger.Warn("forged metrics listening", "address", metricsListener.Addr().String())
			}
			if socket == "" {
				socket = filepath.Join(flags.stateRoot, "forged.sock")
			}
			allowed := make([]uint32, 0, len(allowUIDs))
			for _, uid := range allowUIDs {
				if uid > math.MaxUint32 {
					return fmt.Errorf("--allow-uid %d is not a uid", uid)
				}
				allowed = append(allowed, uint32(uid))
			}
			l, err := httpapi.Listen(socket, httpapi.ListenOptions{
				AllowedUIDs: allowed,
				OnRefused: func(peer httpapi.PeerCred, err error) {
					logger.Warn("refused a connection to the daemon socket", "uid", peer.UID, "pid", peer.PID, "err", err)
				},
			})
			if err != nil {
				return err
			}
			logger.Warn("forged daemon listening", "socket", socket)
			fmt.Fprintf(os.Stderr, "forged: listening on %s\n", socket)
			serveErr := httpapi.Serve(ctx, l, httpapi.HandlerWith(served, logger, httpapi.Options{ManageToken: manageToken, AllowedHosts: allowedHosts}), 10*time.Second)
			if onStop == onStopDetach {
				// Admission stopped with the API. Nothing of the running
				// attempts is touched: not their contexts, not their
				// ledgers, not the engine clients their goroutines use.
				// The process ends here, and the next start on this state
				// root re-adopts them (docs/operations.md).
				detached = true
				snap, _ := r.Snapshot()
				logger.Warn("forged detached: running attempts keep running, and the next start re-adopts them", "attempts", snap.Attempts, "queued", snap.Queued)
				if metricsDone != nil {
					serveErr = errors.Join(serveErr, <-metricsDone)
				}
				return serveErr
			}
			// The first signal stopped admission (the API is closed); a
			// second one now ends the process at once, leaving the rest to
			// the next start's reaper. Cancel what runs and let every
			// attempt tear down before the actor system stops.
			stop()
			membership.setDraining(true)
			drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 3*time.Minute)
			defer cancel()
			if err := r.Drain(drainCtx, "the daemon is shutting down"); err != nil {
				logger.Error("drain incomplete; the next start's reaper removes what remains", "err", err)
			}
			if metricsDone != nil {
				serveErr = errors.Join(serveErr, <-metricsDone)
			}
			return serveErr
		},
	}
	flags.register(cmd)
	cmd.Flags().BoolVar(&imageGC, "image-gc", true, "run the image collector when the disk turns low (and every --image-gc-interval); false: never collect images")
	cmd.Flags().DurationVar(&gc.Interval, "image-gc-interval", 0, "also run the image collector this often (0: only when the disk turns low, or on `forged gc`)")
	cmd.Flags().IntVar(&gc.Policy.KeepPerProject, "image-gc-keep", 3, "image keys the collector keeps per project, newest first")
	cmd.Flags().DurationVar(&gc.Policy.MaxAge, "image-gc-max-age", 7*24*time.Hour, "older keys beyond the newest are collected")
	cmd.Flags().IntVar(&gc.Policy.AuditKeep, "image-gc-audit-keep", imagegc.DefaultAuditKeep, "image keys whose stored build logs the collector keeps, newest first")
	cmd.Flags().DurationVar(&gc.Policy.AuditMaxAge, "image-gc-audit-max-age", imagegc.DefaultAuditMaxAge, "stored build logs older than this are collected (at least 1h)")
	cmd.Flags().StringVar(&socket, "socket", "", "unix socket path (default STATE_ROOT/forged.sock)")
	cmd.Flags().UintSliceVar(&allowUIDs, "allow-uid", nil, "uids, besides root and forged's own, whose processes may use the socket (checked with SO_PEERCRED; repeatable)")
	cmd.Flags().StringArrayVar(&allowedHosts, "api-allowed-host", nil, "a Host name (or address) the API answers to besides localhost, loopback addresses and forged, e.g. the name of a forward (repeatable)")
	metricsFlags.register(cmd)
	cmd.Flags().StringVar(&onStop, "on-stop", onStopDrain, "what SIGTERM does to running attempts: "+onStopDrain+" (cancel them and tear them down before exiting) or "+onStopDetach+" (stop admitting, leave them running and exit at once, for an upgrade: the next start re-adopts them)")
	fleetSettings.register(cmd)
	fleetSettings.registerPlacement(cmd)
	cmd.Flags().StringVar(&manageTokenFile, "console-manage-token-file", "", "file (mode 0600) holding the bearer token that lets the console cancel attempts (default: the console is read-only)")
	return cmd
}

// The values of --on-stop.
const (
	onStopDrain  = "drain"
	onStopDetach = "detach"
)

// metricsListenFlags configure the optional TCP listener for /metrics. It
// is off by default; when on, every request needs the bearer token.
type metricsListenFlags struct {
	address, tokenFile string
}

func (m *metricsListenFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringVar(&m.address, "metrics-listen", "", "also serve /metrics on this TCP host:port, behind a bearer token (default: only on the unix socket)")
	cmd.Flags().StringVar(&m.tokenFile, "metrics-token-file", "", "file (mode 0600) holding the bearer token the TCP metrics listener requires")
}

// listen opens the TCP listener, or returns nil when none is configured.
func (m *metricsListenFlags) listen() (net.Listener, string, error) {
	if m.address == "" {
		if m.tokenFile != "" {
			return nil, "", errors.New("config: metricsTokenFile is set but metricsListen is not")
		}
		return nil, "", nil
	}
	host, _, err := net.SplitHostPort(m.address)
	if err != nil {
		return nil, "", fmt.Errorf("config: metricsListen: %w", err)
	}
	if host == "" {
		return nil, "", fmt.Errorf("config: metricsListen %q: name the address to listen on (0.0.0.0 for every interface)", m.address)
	}
	token, err := bearer.ReadTokenFile(m.tokenFile)
	if err != nil {
		return nil, "", fmt.Errorf("config: metricsTokenFile: %w", err)
	}
	l, err := net.Listen("tcp", m.address)
	if err != nil {
		return nil, "", fmt.Errorf("config: metricsListen: %w", err)
	}
	return l, token, nil
}
