package config

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type testFlags struct {
	slots   int
	timeout time.Duration
	hosts   []string
	uids    []uint
	rootful bool
	socket  string
}

func newFlagSet(v *testFlags) *pflag.FlagSet {
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	fs.IntVar(&v.slots, "slots", 2, "")
	fs.DurationVar(&v.timeout, "publish-timeout", 30*time.Second, "")
	fs.StringSliceVar(&v.hosts, "publish-allowed-hosts", []string{"github.com"}, "")
	fs.UintSliceVar(&v.uids, "allow-uid", nil, "")
	fs.BoolVar(&v.rootful, "allow-rootful", false, "")
	fs.StringVar(&v.socket, "socket", "", "")
	fs.String("config", "", "")
	SetMin(fs, "slots", 1)
	return fs
}

func envOf(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func TestNamesAreDerivedFromTheFlag(t *testing.T) {
	assert.Equal(t, "publishAllowedHosts", Key("publish-allowed-hosts"))
	assert.Equal(t, "slots", Key("slots"))
	assert.Equal(t, "FORGED_PUBLISH_ALLOWED_HOSTS", EnvName("publish-allowed-hosts"))
	assert.Equal(t, "FORGED_ALLOW_UID", EnvName("allow-uid"))
}

func TestPrecedenceFlagsThenEnvironmentThenFile(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		env    map[string]string
		file   string
		check  func(t *testing.T, v testFlags)
		source map[string]Source
	}{
		{
			name: "defaults alone",
			check: func(t *testing.T, v testFlags) {
				assert.Equal(t, 2, v.slots)
				assert.Equal(t, []string{"github.com"}, v.hosts)
			},
			source: map[string]Source{"slots": SourceDefault, "publishAllowedHosts": SourceDefault},
		},
		{
			name: "file over default",
			file: "slots: 5\npublishTimeout: 7s\npublishAllowedHosts: [a.example, 'b.example:8443']\nallowUid: [1000, 1001]\nallowRootful: true\n",
			check: func(t *testing.T, v testFlags) {
				assert.Equal(t, 5, v.slots)
				assert.Equal(t, 7*time.Second, v.timeout)
				assert.Equal(t, []string{"a.example", "b.example:8443"}, v.hosts)
				assert.Equal(t, []uint{1000, 1001}, v.uids)
				assert.True(t, v.rootful)
			},
			source: map[string]Source{"slots": SourceFile, "publishTimeout": SourceFile, "allowUid": SourceFile, "socket": SourceDefault},
		},
		{
			name: "environment over file",
			env:  map[string]string{"FORGED_SLOTS": "6", "FORGED_PUBLISH_ALLOWED_HOSTS": "env.example,other.example"},
			file: "slots: 5\npublishAllowedHosts: [file.example]\npublishTimeout: 7s\n",
			check: func(t *testing.T, v testFlags) {
				assert.Equal(t, 6, v.slots)
				assert.Equal(t, []string{"env.example", "other.example"}, v.hosts)
				assert.Equal(t, 7*time.Second, v.timeout)
			},
			source: map[string]Source{"slots": SourceEnv, "publishAllowedHosts": SourceEnv, "publishTimeout": SourceFile},
		},
		{
			name: "flag over environment and file",
			args: []string{"--slots", "7", "--publish-allowed-hosts", "flag.example"},
			env:  map[string]string{"FORGED_SLOTS": "6", "FORGED_PUBLISH_ALLOWED_HOSTS": "env.example"},
			file: "slots: 5\npublishAllowedHosts: [file.example]\n",
			check: func(t *testing.T, v testFlags) {
				assert.Equal(t, 7, v.slots)
				assert.Equal(t, []string{"flag.example"}, v.hosts)
			},
			source: map[string]Source{"slots": SourceFlag, "publishAllowedHosts": SourceFlag},
		},
		{
			name:   "a flag equal to the default still wins",
			args:   []string{"--slots", "2"},
			env:    map[string]string{"FORGED_SLOTS": "6"},
			check:  func(t *testing.T, v testFlags) { assert.Equal(t, 2, v.slots) },
			source: map[string]Source{"slots": SourceFlag},
		},
		{
			name:   "an empty environment list empties the default",
			env:    map[string]string{"FORGED_PUBLISH_ALLOWED_HOSTS": ""},
			check:  func(t *testing.T, v testFlags) { assert.Empty(t, v.hosts) },
			source: map[string]Source{"publishAllowedHosts": SourceEnv},
		},
		{
			name:   "a single value for a list in the file",
			file:   "publishAllowedHosts: one.example\n",
			check:  func(t *testing.T, v testFlags) { assert.Equal(t, []string{"one.example"}, v.hosts) },
			source: map[string]Source{"publishAllowedHosts": SourceFile},
		},
		{
			name:   "the config flag itself is no setting",
			file:   "slots: 3\n",
			check:  func(t *testing.T, v testFlags) { assert.Equal(t, 3, v.slots) },
			source: map[string]Source{"config": ""},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v testFlags
			fs := newFlagSet(&v)
			require.NoError(t, fs.Parse(tc.args))
			opts := Options{LookupEnv: envOf(tc.env), Skip: func(f string) bool { return f == "config" }}
			if tc.file != "" {
				file, err := Parse("forged.yaml", []byte(tc.file), knownIn(fs))
				require.NoError(t, err)
				opts.File = file
			}
			settings, err := Apply(fs, opts)
			require.NoError(t, err)
			tc.check(t, v)
			got := map[string]Source{}
			for _, s := range settings {
				got[s.Key] = s.Source
			}
			for key, want := range tc.source {
				assert.Equal(t, want, got[key], key)
			}
		})
	}
}

func knownIn(fs *pflag.FlagSet) func(string) bool {
	return func(key string) bool {
		found := false
		fs.VisitAll(func(f *pflag.Flag) { found = found || Key(f.Name) == key })
		return found
	}
}

func TestInvalidSettingsNameTheKey(t *testing.T) {
	cases := []struct {
		name, file string
		env        map[string]string
		want       string
	}{
		{"unknown key", "slots: 2\nslotz: 3\n", nil, "config: slotz (file forged.yaml line 2): unknown key"},
		{"repeated key", "slots: 2\nslots: 3\n", nil, "config: slots (file forged.yaml line 2): repeated (first at line 1)"},
		{"not a number", "slots: many\n", nil, `config: slots (file forged.yaml line 1): invalid value "many"`},
		{"a list for a scalar", "slots: [1, 2]\n", nil, "config: slots (file forged.yaml line 1): a single int expected, not a list"},
		{"a mapping", "publishAllowedHosts: {a: b}\n", nil, "config: publishAllowedHosts (file forged.yaml line 1): a value or a list"},
		{"no value", "socket:\n", nil, "config: socket (file forged.yaml line 1): no value"},
		{"bad uid list", "allowUid: [1, -1]\n", nil, "config: allowUid (file forged.yaml line 1): invalid list"},
		{"bad environment", "", map[string]string{"FORGED_PUBLISH_TIMEOUT": "soon"}, `config: publishTimeout (env FORGED_PUBLISH_TIMEOUT): invalid value "soon"`},
		{"bad environment bool", "", map[string]string{"FORGED_ALLOW_ROOTFUL": "maybe"}, `config: allowRootful (env FORGED_ALLOW_ROOTFUL)`},
		{"below the least value", "slots: 0\n", nil, "config: slots (file forged.yaml line 1): 0 is below the least value, 1"},
		{"below the least value from env", "", map[string]string{"FORGED_SLOTS": "-3"}, "config: slots (env FORGED_SLOTS): -3 is below the least value, 1"},
		{"two documents", "slots: 1\n---\nslots: 2\n", nil, "one YAML document expected"},
		{"not a mapping", "- slots\n", nil, "a mapping of settings expected"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var v testFlags
			fs := newFlagSet(&v)
			require.NoError(t, fs.Parse(nil))
			file, err := Parse("forged.yaml", []byte(tc.file), knownIn(fs))
			if err == nil {
				_, err = Apply(fs, Options{File: file, LookupEnv: envOf(tc.env)})
			}
			require.Error(t, err)
			assert.Contains(t, err.Error(), tc.want)
		})
	}
}

func TestKeyErrorCarriesTheKey(t *testing.T) {
	var v testFlags
	fs := newFlagSet(&v)
	_, err := Apply(fs, Options{LookupEnv: envOf(map[string]string{"FORGED_SLOTS": "x"})})
	var ke *KeyError
	require.True(t, errors.As(err, &ke))
	assert.Equal(t, "slots", ke.Key)
	assert.Equal(t, SourceEnv, ke.Source)
}

func TestLoadFileReadsARealFileAndRefusesAMissingOne(t *testing.T) {
	path := filepath.Join(t.TempDir(), "forged.yaml")
	require.NoError(t, os.WriteFile(path, []byte("# forged\nslots: 4 # four\n"), 0o600))
	file, err := LoadFile(path, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"slots"}, file.Keys())
	_, err = LoadFile(filepath.Join(t.TempDir(), "missing.yaml"), nil)
	assert.ErrorIs(t, err, os.ErrNotExist)
	empty := filepath.Join(t.TempDir(), "empty.yaml")
	require.NoError(t, os.WriteFile(empty, nil, 0o600))
	file, err = LoadFile(empty, nil)
	require.NoError(t, err)
	assert.Empty(t, file.Keys())
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("slots: 2\npublishAllowedHosts: [a, b]\n"))
	f.Add([]byte("- x\n"))
	f.Add([]byte("a: &x 1\nb: *x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse("f.yaml", data, nil)
		if err != nil {
			return
		}
		var v testFlags
		fs := newFlagSet(&v)
		_, _ = Apply(fs, Options{File: file})
	})
}
