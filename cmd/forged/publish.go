package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/gitops"
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
	forbiddenPaths              []string
	authorPolicy, identity      string
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
	fs.StringSliceVar(&p.forbiddenPaths, "publish-forbidden-paths", append([]string(nil), gitops.DefaultForbiddenPaths...), "paths a published result may not add, change or remove (a trailing / is a directory); empty allows all")
	fs.StringVar(&p.authorPolicy, "publish-author-policy", gitops.AuthorAny, "any: publish commits' authors as written; require: refuse a result with a commit not authored and committed by --publish-identity; rewrite: make --publish-identity the author and committer of a bridge_push result's commits at its import")
	fs.StringVar(&p.identity, "publish-identity", gitops.DefaultIdentity.String(), "the \"Name <email>\" --publish-author-policy require demands and rewrite writes (default: the worker's own)")
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
	identity, err := gitops.ParseIdentity(p.identity)
	if err != nil {
		return fmt.Errorf("config: publishIdentity: %w", err)
	}
	policy := gitops.PublishPolicy{ForbiddenPaths: p.forbiddenPaths, Author: p.authorPolicy, Identity: identity}
	if err := policy.Validate(); err != nil {
		return fmt.Errorf("config: publishForbiddenPaths/publishAuthorPolicy: %w", err)
	}
	cfg.PublishPolicy = &policy
	return nil
}
