package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/publish/redeem"
)

// publishFlags configure bridge_push publication: the grant redeemer (a
// credential helper or an HTTPS endpoint) and the allowed remotes. Like
// every flag, each has a FORGED_* environment variable and a file key
// (package config).
type publishFlags struct {
	helper, endpoint            string
	tokenFile, caFile           string
	timeout                     time.Duration
	allowedHosts, allowedOwners []string
}

func (p *publishFlags) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&p.helper, "publish-helper", "", "absolute path of a credential helper that redeems publication grants")
	fs.StringVar(&p.endpoint, "publish-endpoint", "", "https URL that redeems publication grants")
	fs.StringVar(&p.tokenFile, "publish-token-file", "", "file (mode 0600) holding the endpoint's bearer token")
	fs.StringVar(&p.caFile, "publish-ca-file", "", "PEM CA certificates to trust for the endpoint instead of the system roots")
	fs.DurationVar(&p.timeout, "publish-timeout", redeem.DefaultTimeout, "deadline of one grant redemption")
	fs.StringSliceVar(&p.allowedHosts, "publish-allowed-hosts", []string{redeem.DefaultHost}, "hosts (host or host:port) publication may push to")
	fs.StringSliceVar(&p.allowedOwners, "publish-allowed-owners", nil, "owners (first path segment) publication may push to; empty allows any")
}

// apply sets the runner's redeemer and remote validator.
func (p *publishFlags) apply(cfg *runner.Config) error {
	redeemer, validate, err := redeem.New(redeem.Config{
		HelperPath: p.helper, EndpointURL: p.endpoint, TokenFile: p.tokenFile, CAFile: p.caFile,
		Timeout: p.timeout, AllowedHosts: p.allowedHosts, AllowedOwners: p.allowedOwners,
	})
	if err != nil {
		return err
	}
	cfg.Redeemer, cfg.ValidateRemote = redeemer, validate
	return nil
}
