package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/forgedev/forged/redeem"
	"github.com/forgedev/forged/runner"
)

// publishFlags configure bridge_push publication: the grant redeemer (a
// credential helper or an HTTPS endpoint) and the allowed remotes. Each
// flag has a FORGED_* environment equivalent; a flag given on the command
// line wins.
type publishFlags struct {
	set                         *pflag.FlagSet
	helper, endpoint            string
	tokenFile, caFile           string
	timeout                     time.Duration
	allowedHosts, allowedOwners []string
}

// publishEnv maps each publication flag to its environment variable.
var publishEnv = []struct{ flag, env string }{
	{"publish-helper", "FORGED_PUBLISH_HELPER"},
	{"publish-endpoint", "FORGED_PUBLISH_ENDPOINT"},
	{"publish-token-file", "FORGED_PUBLISH_TOKEN_FILE"},
	{"publish-ca-file", "FORGED_PUBLISH_CA_FILE"},
	{"publish-timeout", "FORGED_PUBLISH_TIMEOUT"},
	{"publish-allowed-hosts", "FORGED_PUBLISH_ALLOWED_HOSTS"},
	{"publish-allowed-owners", "FORGED_PUBLISH_ALLOWED_OWNERS"},
}

func (p *publishFlags) register(cmd *cobra.Command) {
	p.set = cmd.Flags()
	p.set.StringVar(&p.helper, "publish-helper", "", "absolute path of a credential helper that redeems publication grants (env FORGED_PUBLISH_HELPER)")
	p.set.StringVar(&p.endpoint, "publish-endpoint", "", "https URL that redeems publication grants (env FORGED_PUBLISH_ENDPOINT)")
	p.set.StringVar(&p.tokenFile, "publish-token-file", "", "file (mode 0600) holding the endpoint's bearer token (env FORGED_PUBLISH_TOKEN_FILE)")
	p.set.StringVar(&p.caFile, "publish-ca-file", "", "PEM CA certificates to trust for the endpoint instead of the system roots (env FORGED_PUBLISH_CA_FILE)")
	p.set.DurationVar(&p.timeout, "publish-timeout", redeem.DefaultTimeout, "deadline of one grant redemption (env FORGED_PUBLISH_TIMEOUT)")
	p.set.StringSliceVar(&p.allowedHosts, "publish-allowed-hosts", []string{redeem.DefaultHost}, "hosts (host or host:port) publication may push to (env FORGED_PUBLISH_ALLOWED_HOSTS)")
	p.set.StringSliceVar(&p.allowedOwners, "publish-allowed-owners", nil, "owners (first path segment) publication may push to; empty allows any (env FORGED_PUBLISH_ALLOWED_OWNERS)")
}

// apply fills the unset flags from the environment and sets the runner's
// redeemer and remote validator.
func (p *publishFlags) apply(cfg *runner.Config) error {
	for _, b := range publishEnv {
		value, ok := os.LookupEnv(b.env)
		if !ok || p.set.Changed(b.flag) {
			continue
		}
		if err := p.set.Set(b.flag, value); err != nil {
			return fmt.Errorf("%s: %w", b.env, err)
		}
	}
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
