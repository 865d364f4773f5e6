package dockerops

import (
	"github.com/forgedev/forged/internal/kit/text"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// Names are the Docker object names of one attempt. They derive from the
// dispatch attempt id alone, so a crashed runner's leftovers can be named
// again; ownership is nevertheless decided by labels, never by names.
type Names struct {
	AttemptHex      string // the attempt id without hyphens
	Prefix          string // forge-<hex>
	Container       string // forge-agent-<hex>
	Network         string // forge-<hex>
	WorkspaceVolume string // forge-<hex>-workspace
	ControlVolume   string // forge-<hex>-control
	SecretsVolume   string // forge-<hex>-secrets
	// CredentialsVolume holds the provider credentials when the dispatch
	// chooses their mount (messages.CredentialMount): the attempt's own,
	// never mounted into a service.
	CredentialsVolume string // forge-<hex>-credentials
	// SecretsLoader is the container that fills the secrets volume with
	// provider credentials (created, never started, removed at once).
	SecretsLoader string // forge-<hex>-secrets-loader
	// VolumeOwner is the container that gives the attempt's volumes to its
	// sandbox user (OwnVolumes: created, never started, removed at once).
	VolumeOwner string // forge-<hex>-volume-owner
}

// NamesFor returns the resource names of the attempt. attemptID must be a
// full lowercase UUID; anything else is failure.SandboxIdentityInvalid.
func NamesFor(attemptID string) (Names, error) {
	if !messages.IsFullUUID(attemptID) {
		return Names{}, failure.New(failure.SandboxIdentityInvalid,
			"dispatch attempt id %q is not a full lowercase UUID", text.Clip(attemptID, 64))
	}
	hex := strings.ReplaceAll(attemptID, "-", "")
	prefix := "forge-" + hex
	return Names{
		AttemptHex:        hex,
		Prefix:            prefix,
		Container:         "forge-agent-" + hex,
		Network:           prefix,
		WorkspaceVolume:   prefix + "-workspace",
		ControlVolume:     prefix + "-control",
		SecretsVolume:     prefix + "-secrets",
		CredentialsVolume: prefix + "-credentials",
		SecretsLoader:     prefix + "-secrets-loader",
		VolumeOwner:       prefix + "-volume-owner",
	}, nil
}

// CacheVolume is the attempt's per-attempt volume of the named package
// cache (the seed's forge-<hex>-cache-<name>).
func (n Names) CacheVolume(cache string) string { return n.Prefix + "-cache-" + cache }
