package redeem

import (
	"context"
	"errors"
	"time"

	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// Config is the operator's choice of redeemer and publication remotes.
type Config struct {
	// HelperPath selects the credential helper kind.
	HelperPath string
	// EndpointURL selects the HTTPS endpoint kind, with its bearer
	// TokenFile and an optional CAFile.
	EndpointURL string
	TokenFile   string
	CAFile      string
	// Timeout bounds one redemption (DefaultTimeout when zero).
	Timeout time.Duration
	// AllowedHosts and AllowedOwners make the RemotePolicy (default:
	// github.com, any owner).
	AllowedHosts  []string
	AllowedOwners []string
}

// Redeemer redeems a publication grant for a short-lived credential; the
// attempt actors take it as their actors.CredentialRedeemer.
type Redeemer interface {
	Redeem(ctx context.Context, req messages.PublicationRequest) (gitops.Credential, error)
}

// New builds the configured redeemer and the remote validator to give
// the runner (runner.Config.Redeemer and ValidateRemote). With neither a
// helper nor an endpoint it returns a nil redeemer, which refuses
// bridge_push; configuring both, or endpoint settings without an
// endpoint, is an error.
func New(cfg Config) (Redeemer, gitops.RemoteValidator, error) {
	policy, err := NewRemotePolicy(cfg.AllowedHosts, cfg.AllowedOwners)
	if err != nil {
		return nil, nil, err
	}
	if cfg.Timeout < 0 {
		return nil, nil, errors.New("publication timeout must not be negative")
	}
	switch {
	case cfg.HelperPath != "" && cfg.EndpointURL != "":
		return nil, nil, errors.New("configure either a publication helper or a publication endpoint, not both")
	case cfg.HelperPath != "":
		if cfg.TokenFile != "" || cfg.CAFile != "" {
			return nil, nil, errors.New("the publication token and CA files belong to a publication endpoint, not to a helper")
		}
		h, err := NewHelper(cfg.HelperPath, cfg.Timeout, policy)
		if err != nil {
			return nil, nil, err
		}
		return h, policy.Validate, nil
	case cfg.EndpointURL != "":
		e, err := NewEndpoint(cfg.EndpointURL, cfg.TokenFile, cfg.CAFile, cfg.Timeout, policy)
		if err != nil {
			return nil, nil, err
		}
		return e, policy.Validate, nil
	case cfg.TokenFile != "" || cfg.CAFile != "":
		return nil, nil, errors.New("the publication token and CA files need a publication endpoint")
	}
	return nil, policy.Validate, nil
}
