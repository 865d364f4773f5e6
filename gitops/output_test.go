package gitops

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

func testIdentity() messages.SandboxIdentity {
	return messages.SandboxIdentity{
		DispatchAttemptID: testAttemptID,
		ExecutionLeaseID:  "1a2b3c4d-0000-4000-8000-000000000001",
		FencingToken:      "1a2b3c4d-0000-4000-8000-000000000002",
		RunnerInstanceID:  "1a2b3c4d-0000-4000-8000-000000000003",
		InputCommitSHA:    oid('1'),
		Branch:            "forge/task",
		ContractDigest:    "sha256:" + strings.Repeat("c", 64),
		ImageDigest:       "sha256:" + strings.Repeat("d", 64),
	}
}

// outputFixture is a worker output directory with result.json, optionally
// result.bundle, and a manifest describing them.
type outputFixture struct {
	dir      string
	manifest messages.Manifest
}

func describeFile(name, content string) messages.OutputFile {
	sum := sha256.Sum256([]byte(content))
	return messages.OutputFile{Path: name, Bytes: int64(len(content)), SHA256: hex.EncodeToString(sum[:])}
}

func newOutput(t *testing.T, withBundle bool) *outputFixture {
	t.Helper()
	f := &outputFixture{dir: t.TempDir()}
	result := `{"schemaVersion":1,"exitCode":0}`
	writeFile(t, filepath.Join(f.dir, messages.ResultFile), result)
	f.manifest = messages.Manifest{SandboxIdentity: testIdentity(), Result: describeFile(messages.ResultFile, result)}
	if withBundle {
		bundle := "# v2 git bundle\nnot really\n"
		writeFile(t, filepath.Join(f.dir, messages.ResultBundleFile), bundle)
		sha := oid('2')
		bf := describeFile(messages.ResultBundleFile, bundle)
		f.manifest.ResultCommitSHA, f.manifest.Bundle = &sha, &bf
	}
	f.write(t)
	return f
}

func (f *outputFixture) write(t *testing.T) {
	t.Helper()
	raw, err := json.Marshal(f.manifest)
	require.NoError(t, err)
	f.writeRaw(t, string(raw))
}

func (f *outputFixture) writeRaw(t *testing.T, raw string) {
	t.Helper()
	path := filepath.Join(f.dir, messages.ManifestFile)
	require.NoError(t, os.RemoveAll(path))
	writeFile(t, path, raw)
}

func requireCode(t *testing.T, err error, code failure.Code, msg string) {
	t.Helper()
	require.Error(t, err)
	assert.Equal(t, code, failure.CodeOf(err), "%v", err)
	if msg != "" {
		assert.Contains(t, err.Error(), msg)
	}
}

func TestValidateOutputHappyPath(t *testing.T) {
	t.Parallel()
	for _, withBundle := range []bool{true, false} {
		f := newOutput(t, withBundle)
		out, err := ValidateOutput(f.dir, testIdentity())
		require.NoError(t, err)
		assert.Equal(t, f.manifest, out.Manifest)
		assert.Equal(t, filepath.Join(f.dir, messages.ResultFile), out.ResultPath)
		if withBundle {
			assert.Equal(t, filepath.Join(f.dir, messages.ResultBundleFile), out.BundlePath)
		} else {
			assert.Empty(t, out.BundlePath)
		}
	}
}

func TestValidateOutputMissingManifest(t *testing.T) {
	t.Parallel()
	f := newOutput(t, false)
	require.NoError(t, os.Remove(filepath.Join(f.dir, messages.ManifestFile)))
	_, err := ValidateOutput(f.dir, testIdentity())
	requireCode(t, err, failure.SandboxOutputMissing, "manifest.json")
}

func TestValidateOutputManifestMustBeBoundedRegularFile(t *testing.T) {
	t.Parallel()
	tests := map[string]func(t *testing.T, f *outputFixture){
		"symlink": func(t *testing.T, f *outputFixture) {
			real := filepath.Join(t.TempDir(), "real.json")
			require.NoError(t, os.Rename(filepath.Join(f.dir, messages.ManifestFile), real))
			require.NoError(t, os.Symlink(real, filepath.Join(f.dir, messages.ManifestFile)))
		},
		"directory": func(t *testing.T, f *outputFixture) {
			path := filepath.Join(f.dir, messages.ManifestFile)
			require.NoError(t, os.Remove(path))
			require.NoError(t, os.Mkdir(path, 0o755))
		},
		"fifo": func(t *testing.T, f *outputFixture) {
			path := filepath.Join(f.dir, messages.ManifestFile)
			require.NoError(t, os.Remove(path))
			require.NoError(t, syscall.Mkfifo(path, 0o644))
		},
		"too large": func(t *testing.T, f *outputFixture) {
			raw, err := json.Marshal(f.manifest)
			require.NoError(t, err)
			f.writeRaw(t, string(raw)+strings.Repeat(" ", MaxManifestBytes))
		},
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newOutput(t, true)
			mutate(t, f)
			_, err := ValidateOutput(f.dir, testIdentity())
			requireCode(t, err, failure.SandboxOutputInvalid, "manifest")
		})
	}
}

func TestValidateOutputStrictJSON(t *testing.T) {
	t.Parallel()
	valid, err := json.Marshal(newOutput(t, false).manifest)
	require.NoError(t, err)
	tests := map[string]string{
		"unknown field":   strings.Replace(string(valid), `{`, `{"extra":1,`, 1),
		"trailing data":   string(valid) + `{}`,
		"not json":        "manifest",
		"wrong type":      strings.Replace(string(valid), `"bytes":`, `"bytes":"1",`+`"x":`, 1),
		"empty":           "",
		"array":           "[]",
		"truncated":       string(valid[:len(valid)-1]),
		"negative length": strings.Replace(string(valid), `"bytes":`, `"bytes":-`, 1),
	}
	for name, raw := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newOutput(t, false)
			f.writeRaw(t, raw)
			_, err := ValidateOutput(f.dir, testIdentity())
			requireCode(t, err, failure.SandboxOutputInvalid, "")
		})
	}
}

func TestValidateOutputIdentityMismatch(t *testing.T) {
	t.Parallel()
	tests := map[string]func(*messages.SandboxIdentity){
		"dispatchAttemptId": func(id *messages.SandboxIdentity) { id.DispatchAttemptID = "1a2b3c4d-0000-4000-8000-0000000000ff" },
		"executionLeaseId":  func(id *messages.SandboxIdentity) { id.ExecutionLeaseID = "x" },
		"fencingToken":      func(id *messages.SandboxIdentity) { id.FencingToken = "1a2b3c4d-0000-4000-8000-000000000009" },
		"runnerInstanceId":  func(id *messages.SandboxIdentity) { id.RunnerInstanceID = "" },
		"inputCommitSha":    func(id *messages.SandboxIdentity) { id.InputCommitSHA = oid('9') },
		"branch":            func(id *messages.SandboxIdentity) { id.Branch = "main" },
		"contractDigest":    func(id *messages.SandboxIdentity) { id.ContractDigest = "sha256:" + strings.Repeat("0", 64) },
		"imageDigest":       func(id *messages.SandboxIdentity) { id.ImageDigest = strings.ToUpper(testIdentity().ImageDigest) },
	}
	for field, mutate := range tests {
		t.Run(field, func(t *testing.T) {
			t.Parallel()
			f := newOutput(t, true)
			mutate(&f.manifest.SandboxIdentity)
			f.write(t)
			_, err := ValidateOutput(f.dir, testIdentity())
			requireCode(t, err, failure.SandboxOutputInvalid, "manifest identity or fence mismatch")
		})
	}
}

func TestValidateOutputResultAndBundleTogether(t *testing.T) {
	t.Parallel()
	short, upper := oid('2')[:39], strings.ToUpper(oid('a'))
	tests := map[string]func(m *messages.Manifest){
		"commit without bundle": func(m *messages.Manifest) { m.Bundle = nil },
		"bundle without commit": func(m *messages.Manifest) { m.ResultCommitSHA = nil },
		"abbreviated commit":    func(m *messages.Manifest) { m.ResultCommitSHA = &short },
		"uppercase commit":      func(m *messages.Manifest) { m.ResultCommitSHA = &upper },
		"bundle is the result":  func(m *messages.Manifest) { b := m.Result; m.Bundle = &b },
	}
	for name, mutate := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			f := newOutput(t, true)
			mutate(&f.manifest)
			f.write(t)
			_, err := ValidateOutput(f.dir, testIdentity())
			requireCode(t, err, failure.SandboxOutputInvalid, "")
		})
	}
}

func TestValidateOutputFileChecks(t *testing.T) {
	t.Parallel()
	type mutation func(t *testing.T, f *outputFixture, file *messages.OutputFile)
	rename := func(name string) mutation {
		return func(_ *testing.T, _ *outputFixture, file *messages.OutputFile) { file.Path = name }
	}
	tests := []struct {
		name    string
		mutate  mutation
		wantMsg string
	}{
		{"size mismatch", func(_ *testing.T, _ *outputFixture, file *messages.OutputFile) { file.Bytes++ }, "declares"},
		{"negative size", func(_ *testing.T, _ *outputFixture, file *messages.OutputFile) { file.Bytes = -1 }, "declares"},
		{"hash mismatch", func(_ *testing.T, _ *outputFixture, file *messages.OutputFile) { file.SHA256 = strings.Repeat("0", 64) }, "sha256"},
		{"uppercase hash", func(_ *testing.T, _ *outputFixture, file *messages.OutputFile) {
			file.SHA256 = strings.ToUpper(file.SHA256)
		}, "sha256"},
		{"content changed", func(t *testing.T, f *outputFixture, file *messages.OutputFile) {
			raw, err := os.ReadFile(filepath.Join(f.dir, file.Path))
			require.NoError(t, err)
			raw[0] ^= 1
			require.NoError(t, os.WriteFile(filepath.Join(f.dir, file.Path), raw, 0o644))
		}, "sha256"},
		{"missing file", rename("absent.json"), "regular file"},
		{"parent path", rename("../" + messages.ResultFile), "invalid"},
		{"nested path", rename("sub/x.json"), "invalid"},
		{"absolute path", rename("/etc/passwd"), "invalid"},
		{"empty path", rename(""), "invalid"},
		{"dot", rename("."), "invalid"},
		{"dot dot", rename(".."), "invalid"},
		{"space", rename("a b"), "invalid"},
		{"symlink", func(t *testing.T, f *outputFixture, file *messages.OutputFile) {
			real := filepath.Join(t.TempDir(), "real")
			require.NoError(t, os.Rename(filepath.Join(f.dir, file.Path), real))
			require.NoError(t, os.Symlink(real, filepath.Join(f.dir, file.Path)))
		}, "regular file"},
		{"directory", func(t *testing.T, f *outputFixture, file *messages.OutputFile) {
			require.NoError(t, os.Mkdir(filepath.Join(f.dir, "d"), 0o755))
			file.Path = "d"
		}, "regular file"},
		{"over bound", func(t *testing.T, f *outputFixture, file *messages.OutputFile) {
			// Sparse, so the test stays cheap; refused before hashing.
			require.NoError(t, os.Truncate(filepath.Join(f.dir, file.Path), MaxBundleBytes+1))
			file.Bytes = MaxBundleBytes + 1
		}, "limit"},
	}
	for _, tc := range tests {
		for _, which := range []string{"result", "bundle"} {
			t.Run(tc.name+"/"+which, func(t *testing.T) {
				t.Parallel()
				f := newOutput(t, true)
				file := &f.manifest.Result
				if which == "bundle" {
					file = f.manifest.Bundle
				}
				tc.mutate(t, f, file)
				f.write(t)
				_, err := ValidateOutput(f.dir, testIdentity())
				requireCode(t, err, failure.SandboxOutputInvalid, tc.wantMsg)
			})
		}
	}
}

func TestValidateOutputResultBound(t *testing.T) {
	t.Parallel()
	f := newOutput(t, false)
	require.NoError(t, os.Truncate(filepath.Join(f.dir, messages.ResultFile), MaxResultBytes+1))
	f.manifest.Result.Bytes = MaxResultBytes + 1
	f.write(t)
	_, err := ValidateOutput(f.dir, testIdentity())
	requireCode(t, err, failure.SandboxOutputInvalid, "limit 16777216")
}
