package main

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/internal/daemon/config"
	"github.com/forgedev/forged/internal/daemon/runner"
	"github.com/forgedev/forged/internal/publish/redeem"
)

// parsePublish registers the publication flags on a fresh command, parses
// args, layers the environment under them and applies them.
func parsePublish(t *testing.T, args ...string) (runner.Config, *publishFlags, error) {
	t.Helper()
	var p publishFlags
	cmd := &cobra.Command{Use: "x"}
	p.register(cmd)
	require.NoError(t, cmd.ParseFlags(args))
	var cfg runner.Config
	if _, err := config.Apply(cmd.Flags(), config.Options{LookupEnv: os.LookupEnv}); err != nil {
		return cfg, &p, err
	}
	err := p.apply(&cfg)
	return cfg, &p, err
}

func TestPublishFlagsDefaultRefusesBridgePushAndAllowsGitHubOnly(t *testing.T) {
	cfg, _, err := parsePublish(t)
	require.NoError(t, err)
	assert.Nil(t, cfg.Redeemer)
	require.NotNil(t, cfg.ValidateRemote)
	assert.NoError(t, cfg.ValidateRemote("https://github.com/o/r.git"))
	assert.Error(t, cfg.ValidateRemote("https://127.0.0.1:8443/o/r.git"))
}

func TestPublishFlagsWinOverTheEnvironment(t *testing.T) {
	dir := t.TempDir()
	helper := filepath.Join(dir, "helper")
	require.NoError(t, os.WriteFile(helper, []byte("#!/bin/sh\nexit 1\n"), 0o700))
	t.Setenv("FORGED_PUBLISH_HELPER", helper)
	t.Setenv("FORGED_PUBLISH_ALLOWED_HOSTS", "env.example.com,127.0.0.1:9")
	t.Setenv("FORGED_PUBLISH_TIMEOUT", "7s")

	cfg, p, err := parsePublish(t)
	require.NoError(t, err)
	assert.IsType(t, &redeem.Helper{}, cfg.Redeemer)
	assert.Equal(t, []string{"env.example.com", "127.0.0.1:9"}, p.allowedHosts)
	assert.Equal(t, "7s", p.timeout.String())
	assert.NoError(t, cfg.ValidateRemote("https://127.0.0.1:9/o/r.git"))

	cfg, p, err = parsePublish(t, "--publish-allowed-hosts", "flag.example.com", "--publish-timeout", "3s")
	require.NoError(t, err)
	assert.Equal(t, []string{"flag.example.com"}, p.allowedHosts)
	assert.Equal(t, "3s", p.timeout.String())
	assert.Error(t, cfg.ValidateRemote("https://env.example.com/o/r.git"))

	t.Setenv("FORGED_PUBLISH_TIMEOUT", "soon")
	_, _, err = parsePublish(t)
	assert.ErrorContains(t, err, "FORGED_PUBLISH_TIMEOUT")
}

func TestPublishFlagsRefuseAnInvalidConfiguration(t *testing.T) {
	_, _, err := parsePublish(t, "--publish-helper", "relative/helper")
	assert.Error(t, err)
	_, _, err = parsePublish(t, "--publish-endpoint", "http://127.0.0.1/x")
	assert.Error(t, err)
	_, _, err = parsePublish(t, "--publish-token-file", "/nonexistent")
	assert.Error(t, err)
}

func TestPublishPolicyFlags(t *testing.T) {
	cfg, _, err := parsePublish(t)
	require.NoError(t, err)
	require.NotNil(t, cfg.PublishPolicy)
	assert.Equal(t, gitops.DefaultPublishPolicy(), *cfg.PublishPolicy, "CI configuration protected, authors as written")

	cfg, _, err = parsePublish(t, "--publish-forbidden-paths=", "--publish-author-policy", "require", "--publish-identity", "Bot <bot@example.com>")
	require.NoError(t, err)
	assert.Empty(t, cfg.PublishPolicy.ForbiddenPaths)
	assert.Equal(t, gitops.AuthorRequire, cfg.PublishPolicy.Author)
	assert.Equal(t, gitops.Identity{Name: "Bot", Email: "bot@example.com"}, cfg.PublishPolicy.Identity)

	cfg, _, err = parsePublish(t, "--publish-author-policy", "rewrite", "--publish-identity", "Bot <bot@example.com>")
	require.NoError(t, err)
	assert.Equal(t, gitops.AuthorRewrite, cfg.PublishPolicy.Author)
	assert.Equal(t, &gitops.Identity{Name: "Bot", Email: "bot@example.com"}, cfg.PublishPolicy.RewriteIdentity(true))
	assert.Nil(t, cfg.PublishPolicy.RewriteIdentity(false), "a result that is not published is imported as written")

	for _, bad := range [][]string{
		{"--publish-author-policy", "impersonate"},
		{"--publish-identity", "bot@example.com"},
		{"--publish-forbidden-paths", "/etc/passwd"},
		{"--publish-forbidden-paths", "../x"},
	} {
		_, _, err := parsePublish(t, bad...)
		assert.ErrorContains(t, err, "config: publish", bad)
	}
}
