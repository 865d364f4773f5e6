package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/internal/daemon/config"
)

// printConfig runs `forged config print --json` with args and env, and
// returns the settings by key.
func printConfig(t *testing.T, env map[string]string, args ...string) (map[string]config.Setting, error) {
	t.Helper()
	root := newRootCommand(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs(append([]string{"config", "print", "--json"}, args...))
	if err := root.Execute(); err != nil {
		return nil, err
	}
	var doc struct {
		File     string           `json:"file"`
		Settings []config.Setting `json:"settings"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &doc), out.String())
	byKey := map[string]config.Setting{}
	for _, s := range doc.Settings {
		byKey[s.Key] = s
	}
	return byKey, nil
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "forged.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
	return path
}

func TestConfigPrecedenceThroughTheCommandLine(t *testing.T) {
	file := writeConfig(t, "slots: 5\nqueue: 9\nallowRootful: true\npublishAllowedHosts: [file.example]\nsocket: /run/forged/file.sock\n")
	cases := []struct {
		name  string
		env   map[string]string
		args  []string
		key   string
		value string
		src   config.Source
	}{
		{"default", nil, nil, "slots", "2", config.SourceDefault},
		{"file", nil, []string{"--config", file}, "slots", "5", config.SourceFile},
		{"file named by FORGED_CONFIG", map[string]string{"FORGED_CONFIG": file}, nil, "queue", "9", config.SourceFile},
		{"env over file", map[string]string{"FORGED_SLOTS": "6"}, []string{"--config", file}, "slots", "6", config.SourceEnv},
		{"flag over env and file", map[string]string{"FORGED_SLOTS": "6"}, []string{"--config", file, "--slots", "7"}, "slots", "7", config.SourceFlag},
		{"env list over file list", map[string]string{"FORGED_PUBLISH_ALLOWED_HOSTS": "a.example,b.example"}, []string{"--config", file}, "publishAllowedHosts", "[a.example,b.example]", config.SourceEnv},
		{"file bool", nil, []string{"--config", file}, "allowRootful", "true", config.SourceFile},
		{"env bool over file", map[string]string{"FORGED_ALLOW_ROOTFUL": "false"}, []string{"--config", file}, "allowRootful", "false", config.SourceEnv},
		{"daemon-only key from the file", nil, []string{"--config", file}, "socket", "/run/forged/file.sock", config.SourceFile},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			settings, err := printConfig(t, tc.env, tc.args...)
			require.NoError(t, err)
			s, ok := settings[tc.key]
			require.True(t, ok, tc.key)
			assert.Equal(t, tc.value, s.Value)
			assert.Equal(t, tc.src, s.Source)
		})
	}
}

func TestInvalidConfigRefusesToStartNamingTheKey(t *testing.T) {
	cases := []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"unknown key", "slots: 2\nworkers: 3\n", nil, "config: workers ("},
		{"invalid duration", "publishTimeout: soon\n", nil, "config: publishTimeout ("},
		{"no slots", "slots: 0\n", nil, "config: slots ("},
		{"negative queue from env", "", map[string]string{"FORGED_QUEUE": "-1"}, "config: queue (env FORGED_QUEUE)"},
		{"a list for a number", "hostReservedCores: [1]\n", nil, "config: hostReservedCores ("},
		{"negative build permits", "buildPermits: -1\n", nil, "config: buildPermits ("},
		{"sample interval past the telemetry's bound", "sampleInterval: 31s\n", nil, "--sample-interval 31s is above 30s"},
		{"build nofile below the seed's range", "buildNofile: 255\n", nil, "--build-nofile 255 is outside the seed's range [256, 65536]"},
		{"build memory above the seed's range from env", "", map[string]string{"FORGED_BUILD_MEMORY_BYTES": "17179869185"}, "--build-memory-bytes 17179869185 is outside the seed's range"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := map[string]string{"FORGED_CONFIG": writeConfig(t, tc.file)}
			for k, v := range tc.env {
				env[k] = v
			}
			root := newRootCommand(func(k string) (string, bool) { v, ok := env[k]; return v, ok })
			// The daemon itself refuses before it touches anything.
			root.SetArgs([]string{"daemon", "--state-root", t.TempDir()})
			err := root.Execute()
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

// TestEveryDaemonFlagIsASetting sets every flag the daemon has (derived
// from its flag set, so a flag added later is covered) from the file and
// from the environment, and checks that config print reports each source.
func TestEveryDaemonFlagIsASetting(t *testing.T) {
	var yaml strings.Builder
	env := map[string]string{}
	flags := daemonCommand().Flags()
	count := 0
	flags.VisitAll(func(f *pflag.Flag) {
		if notSettings(f.Name) {
			return
		}
		count++
		key, value := config.Key(f.Name), f.DefValue
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			quoted := make([]string, 0)
			for _, v := range sv.GetSlice() {
				quoted = append(quoted, fmt.Sprintf("%q", v))
			}
			fmt.Fprintf(&yaml, "%s: [%s]\n", key, strings.Join(quoted, ", "))
			value = strings.Join(sv.GetSlice(), ",")
		} else {
			fmt.Fprintf(&yaml, "%s: %q\n", key, value)
		}
		env[config.EnvName(f.Name)] = value
	})
	require.Positive(t, count)

	settings, err := printConfig(t, nil, "--config", writeConfig(t, yaml.String()))
	require.NoError(t, err, yaml.String())
	assert.Len(t, settings, count)
	for key, s := range settings {
		assert.Equal(t, config.SourceFile, s.Source, key)
	}

	settings, err = printConfig(t, env)
	require.NoError(t, err)
	for key, s := range settings {
		assert.Equal(t, config.SourceEnv, s.Source, key)
	}
}

func TestConfigPrintTextNamesTheSourceAndEscapesControlCharacters(t *testing.T) {
	root := newRootCommand(func(k string) (string, bool) {
		if k == "FORGED_LSM" {
			return "apparmor=x\x1b[2J", true
		}
		return "", false
	})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"config", "print", "--slots", "3"})
	require.NoError(t, root.Execute())
	assert.Regexp(t, `(?m)^slots\s+3\s+flag\s+--slots\s+FORGED_SLOTS$`, out.String())
	assert.Contains(t, out.String(), `apparmor=x\x1b[2J`)
	assert.NotContains(t, out.String(), "\x1b")
}

// TestContribConfigIsValid reads contrib/forged.yaml as the unit does.
func TestContribConfigIsValid(t *testing.T) {
	settings, err := printConfig(t, nil, "--config", filepath.Join("..", "..", "contrib", "forged.yaml"))
	require.NoError(t, err)
	assert.Equal(t, "/var/lib/forged", settings["stateRoot"].Value)
	assert.Equal(t, "/run/lock/forged", settings["lockRoot"].Value)
	assert.Equal(t, "/run/forged/forged.sock", settings["socket"].Value)
	assert.Equal(t, config.SourceFile, settings["slots"].Source)
}

func TestIsolationFlagIsValidated(t *testing.T) {
	p := preflightFlags{hostReserveBytes: 1, minWorkspaceBytes: 1, diskHigh: 0.9, diskLow: 0.8, requiredIsolation: "runc", gvisorProbeImage: "forged-example/busybox:1"}
	for _, ok := range []string{"runc", "gvisor"} {
		p.isolation = ok
		assert.NoError(t, p.validate(), ok)
	}
	for _, bad := range []string{"", "gVisor", "kata"} {
		p.isolation = bad
		err := p.validate()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "--isolation")
	}
	p.isolation = "runc"
	for _, ok := range []string{"runc", "gvisor"} {
		p.requiredIsolation = ok
		assert.NoError(t, p.validate(), ok)
	}
	for _, bad := range []string{"", "gVisor", "kata"} {
		p.requiredIsolation = bad
		err := p.validate()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "--sandbox-required-isolation")
	}
}

// TestGVisorProbeImageIsASetting: the probe image is a flag, a FORGED_*
// variable and a file key like every setting, and validate refuses what
// is not an image reference or id; --gvisor-services is a setting too.
func TestGVisorProbeImageIsASetting(t *testing.T) {
	settings, err := printConfig(t, nil)
	require.NoError(t, err)
	assert.Equal(t, "forged-example/busybox:1", settings["gvisorProbeImage"].Value)
	assert.Equal(t, "FORGED_GVISOR_PROBE_IMAGE", settings["gvisorProbeImage"].Env)
	settings, err = printConfig(t, map[string]string{"FORGED_GVISOR_PROBE_IMAGE": "registry.example/probe:2"})
	require.NoError(t, err)
	assert.Equal(t, "registry.example/probe:2", settings["gvisorProbeImage"].Value)
	assert.Equal(t, config.SourceEnv, settings["gvisorProbeImage"].Source)
	settings, err = printConfig(t, nil, "--config", writeConfig(t, "gvisorProbeImage: probe:3\n"))
	require.NoError(t, err)
	assert.Equal(t, "probe:3", settings["gvisorProbeImage"].Value)
	assert.Equal(t, config.SourceFile, settings["gvisorProbeImage"].Source)

	settings, err = printConfig(t, map[string]string{"FORGED_GVISOR_SERVICES": "true"})
	require.NoError(t, err)
	assert.Equal(t, "true", settings["gvisorServices"].Value, "--gvisor-services is a setting too")
	assert.Equal(t, config.SourceEnv, settings["gvisorServices"].Source)

	p := preflightFlags{hostReserveBytes: 1, minWorkspaceBytes: 1, diskHigh: 0.9, diskLow: 0.8, isolation: "runc", requiredIsolation: "runc"}
	for _, ok := range []string{"forged-example/busybox:1", "sha256:" + strings.Repeat("a", 64)} {
		p.gvisorProbeImage = ok
		assert.NoError(t, p.validate(), ok)
	}
	for _, bad := range []string{"", "Probe:1", "probe:1 --privileged"} {
		p.gvisorProbeImage = bad
		err := p.validate()
		require.Error(t, err, bad)
		assert.Contains(t, err.Error(), "--gvisor-probe-image")
	}
}
