package preflight

import (
	"context"
	"slices"
	"strings"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/build"
	"github.com/docker/docker/api/types/system"
	"github.com/docker/docker/client"

	"github.com/forgedev/forged/internal/host/dockerctx"
	"github.com/forgedev/forged/messages"
)

// Engine is the part of the Docker Engine API the Checker uses.
// *client.Client implements it.
type Engine interface {
	Ping(ctx context.Context) (types.Ping, error)
	Info(ctx context.Context) (system.Info, error)
	ServerVersion(ctx context.Context) (types.Version, error)
}

var _ Engine = (*client.Client)(nil)

// NewEngineClient returns an Engine API client configured from the
// environment (DOCKER_HOST and friends) or for host when it is not empty,
// negotiating the API version on first use. It does not contact the
// engine; its DaemonHost() is the endpoint to give Options.Endpoint and
// AcquireContextLock.
func NewEngineClient(host string) (*client.Client, error) {
	opts := []client.Opt{client.FromEnv, client.WithAPIVersionNegotiation()}
	if host != "" {
		opts = append(opts, client.WithHost(host))
	} else {
		// The docker CLI's context (DOCKER_CONTEXT, or the current one).
		ep, err := dockerctx.Resolve()
		if err != nil {
			return nil, err
		}
		opts = append(opts, ep.ClientOpts()...)
	}
	return client.NewClientWithOpts(opts...)
}

// Features is messages.EngineFeatures (the wire type lives there).
type Features = messages.EngineFeatures

// featuresOf reads the features from Info and Ping.
func featuresOf(info system.Info, ping types.Ping) Features {
	f := Features{
		CgroupVersion:  info.CgroupVersion,
		CgroupDriver:   info.CgroupDriver,
		StorageDriver:  info.Driver,
		LSM:            []string{},
		BuilderVersion: string(ping.BuilderVersion),
		BuildKit:       ping.BuilderVersion == build.BuilderBuildKit,
		ClassicBuilder: strings.EqualFold(info.OSType, "linux"),
	}
	if f.CgroupVersion == "" {
		f.CgroupVersion = "1" // engines before API 1.40 only knew v1
	}
	for _, opt := range info.SecurityOptions {
		name, rest := securityOption(opt)
		switch name {
		case "rootless":
			f.Rootless = true
		case "userns":
			f.UserNamespaces = true
		case "seccomp":
			f.Seccomp = true
			f.SeccompProfile = rest["profile"]
		case "apparmor", "selinux":
			f.LSM = append(f.LSM, name)
		}
	}
	f.UserNamespaces = f.UserNamespaces || f.Rootless
	if strings.EqualFold(f.StorageDriver, "overlay2") {
		for _, kv := range info.DriverStatus {
			key, val := strings.ToLower(kv[0]), strings.ToLower(kv[1])
			if strings.Contains(key+" "+val, "project quota") && val != "false" && val != "no" {
				f.StorageQuota = true
			}
		}
	}
	return f
}

// securityProfile is the seed's securityProfile feature: both a seccomp
// profile and an LSM option are configured, and the engine enforces
// seccomp and the security module the option names ("apparmor=…" needs
// AppArmor, "label=…" SELinux). It does not read the profile: the attempt
// does, and refuses one it cannot use (dockerops.ResolveSecurityOptions).
func securityProfile(f Features, seccompProfile, lsmOption string) bool {
	lsm := strings.TrimSpace(lsmOption)
	if strings.TrimSpace(seccompProfile) == "" || lsm == "" || !f.Seccomp {
		return false
	}
	kind, _, _ := strings.Cut(lsm, "=")
	module := map[string]string{"apparmor": "apparmor", "label": "selinux"}[kind]
	return module != "" && slices.Contains(f.LSM, module)
}

// securityOption splits "name=seccomp,profile=default" into its name and
// the other key=value pairs. Very old engines list bare names ("seccomp").
func securityOption(opt string) (string, map[string]string) {
	kv := map[string]string{}
	for _, part := range strings.Split(opt, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok {
			k, v = "name", part
		}
		kv[strings.ToLower(strings.TrimSpace(k))] = strings.TrimSpace(v)
	}
	name := strings.ToLower(kv["name"])
	delete(kv, "name")
	return name, kv
}
