package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/kit/remoteurl"
)

// remoteFlags are the settings of dispatches naming repo.remote.
type remoteFlags struct {
	protocols []string
	timeout   time.Duration
	maxBytes  int64
}

func (r *remoteFlags) register(cmd *cobra.Command) {
	cmd.Flags().StringSliceVar(&r.protocols, "remote-protocols", nil, "protocols over which a dispatch's repo.remote is fetched into a mirror in the state root: https, http, ssh, git, file (comma-separated or repeated; default: none, and repo.remote is refused with dispatch_remote_refused). A file:// remote is a host path: with --repo-root it must lie under one, as a repo.localPath")
	cmd.Flags().DurationVar(&r.timeout, "remote-fetch-timeout", gitops.DefaultFetchTimeout, "longest one fetch of a repo.remote into its mirror may take")
	cmd.Flags().Int64Var(&r.maxBytes, "remote-fetch-max-bytes", gitops.DefaultMaxFetchBytes, "largest pack one fetch of a repo.remote may write, in bytes")
}

// policy checks the settings and returns the runner's remote policy.
func (r *remoteFlags) policy() (gitops.RemotePolicy, error) {
	protocols, err := remoteurl.ParseProtocols(r.protocols)
	if err != nil {
		return gitops.RemotePolicy{}, fmt.Errorf("--remote-protocols: %w", err)
	}
	if r.timeout < time.Second {
		return gitops.RemotePolicy{}, fmt.Errorf("--remote-fetch-timeout %s is below 1s", r.timeout)
	}
	if r.maxBytes < 1<<20 {
		return gitops.RemotePolicy{}, fmt.Errorf("--remote-fetch-max-bytes %d is below 1 MiB", r.maxBytes)
	}
	return gitops.RemotePolicy{Protocols: protocols, Timeout: r.timeout, MaxFetchBytes: r.maxBytes}, nil
}
