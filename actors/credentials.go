package actors

import (
	"context"
	"path/filepath"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/publish/providerauth"
	"github.com/forgedev/forged/messages"
)

// Provider credentials (the seed's provider auth adapters). A dispatch
// that names execution.provider and execution.authKind gets its
// provider's credentials in the attempt's secrets volume, which the worker
// mounts read-only at dockerops.SecretsDir (/run/forge-secrets):
//
//   - at start, before anything exists, a provider no adapter serves is
//     refused with sandbox_auth_unavailable;
//   - in the provision step, once the volumes exist, the adapter's helper
//     writes the files into a private directory of the attempt's work
//     directory (removed as soon as it is read), and a loader container
//     that never starts copies them into the secrets volume, owned by the
//     worker's user, mode 0400;
//   - the teardown removes the volume with the attempt's other objects, by
//     label.
//
// The files never reach an environment variable, an argument, an event, a
// log, a ledger or a cleanup report.
//
// A dispatch's execution.credentialMount chooses another place, as the
// seed's adapter chooses its containerMountPath: the files then go into
// the attempt's own credentials volume (dockerops.Names.CredentialsVolume,
// never mounted into a service) at that path, read-only (0400) or, when
// writable, read-write (0600, the volume's root the sandbox user's, bounded
// by the volume store when there is one) for a CLI that refreshes its
// token in place. What the task writes there is never read back: the
// volume goes with the attempt's other objects at teardown.

// credentialsInput is what the provision step needs to load the
// credentials.
type credentialsInput struct {
	auth  ProviderAuth
	dir   string               // the helper's private directory (must not exist)
	image string               // the agent image, for the loader container
	user  messages.SandboxUser // the worker reads the files as its own
	req   providerauth.Request
	// volume is the volume the files go into: the secrets volume, or the
	// credentials volume when mount is set.
	volume string
	mount  *messages.CredentialMount
}

// writable reports whether the task may rewrite its credentials.
func (in *credentialsInput) writable() bool {
	return in != nil && in.mount != nil && in.mount.Writable
}

// ownVolume reports whether the credentials have their own volume.
func (in *credentialsInput) ownVolume() bool { return in != nil && in.mount != nil }

// credentialsMount is the worker's mount of its own credentials volume,
// nil when the credentials (if any) are in the secrets volume.
func (a *attemptActor) credentialsMount() *dockerops.CredentialsMount {
	m := a.d.Execution.CredentialMount
	if a.d.Execution.Provider == "" || a.deps.ProviderAuth == nil || m == nil {
		return nil
	}
	return &dockerops.CredentialsMount{Volume: a.in.names.CredentialsVolume, Target: m.Path, Writable: m.Writable}
}

// checkProviderAuth refuses a dispatch whose provider no adapter serves.
func (a *attemptActor) checkProviderAuth() error {
	e := a.d.Execution
	if e.Provider == "" {
		return nil
	}
	if a.deps.ProviderAuth == nil {
		return failure.New(failure.SandboxAuthUnavailable, "no provider auth adapter is configured for provider %q (auth kind %q)", e.Provider, e.AuthKind)
	}
	return a.deps.ProviderAuth.Check(e.Provider, e.AuthKind)
}

// credentialsInput is nil when the dispatch names no provider.
func (a *attemptActor) credentialsInput() *credentialsInput {
	e := a.d.Execution
	if e.Provider == "" || a.deps.ProviderAuth == nil {
		return nil
	}
	volume := a.in.names.SecretsVolume
	if e.CredentialMount != nil {
		volume = a.in.names.CredentialsVolume
	}
	return &credentialsInput{
		volume: volume,
		mount:  e.CredentialMount,
		auth:   a.deps.ProviderAuth,
		dir:    filepath.Join(a.in.workDir, "credentials"),
		image:  a.image.id,
		user:   a.cfg.User.OrImage(),
		req: providerauth.Request{Provider: e.Provider, AuthKind: e.AuthKind,
			DispatchAttemptID: a.d.AttemptID(), RunnerInstanceID: a.d.Sandbox.RunnerInstanceID},
	}
}

// loadCredentials runs the helper and fills the secrets volume (or the
// credentials volume).
func loadCredentials(ctx context.Context, docker SandboxDocker, names dockerops.Names, labels map[string]string, in credentialsInput) error {
	files, err := in.auth.Prepare(ctx, in.dir, in.req)
	if err != nil {
		return err
	}
	for i := range files {
		files[i].Writable = in.writable()
	}
	if err := docker.LoadVolume(ctx, in.image, names.SecretsLoader, in.volume, labels, files, in.user.UID, in.user.GID); err != nil {
		return failure.Wrap(failure.SandboxAuthUnavailable, err, "load the provider credentials into volume %s", in.volume)
	}
	return nil
}
