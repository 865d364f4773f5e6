package gitops

import (
	"bytes"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/forgedev/forged/failure"
)

func FuzzScanPack(f *testing.F) {
	f.Add(buildPack(f, rawEntry(packBlob, []byte("hello\n"))))
	f.Add(buildPack(f, rawEntry(packBlob, bytes.Repeat([]byte("a"), 100)), ofsDeltaEntry(100, 1000, 1)))
	f.Add([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x01"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, pack []byte) {
		budget := Budget{MaxObjects: 16, MaxExpandedBytes: 1 << 20, MaxDeltaResultBytes: 1 << 16}
		st, err := ScanPack(bytes.NewReader(pack), budget)
		if err != nil {
			if !failure.Is(err, failure.SandboxOutputInvalid) {
				t.Fatalf("error without the output-invalid code: %v", err)
			}
			return
		}
		if st.Objects < 1 || st.Objects > 16 || st.ExpandedBytes > 1<<20 || st.InflatedBytes > 1<<20 {
			t.Fatalf("accepted pack %+v outside budget", st)
		}
	})
}

func FuzzParseBundleHeader(f *testing.F) {
	a := strings.Repeat("a", 40)
	for _, seed := range []string{"", "# v2 git bundle\n", "# v2 git bundle\n-" + a + " x\n" + a + " refs/x\n\nPACK", "# v3 git bundle\n\n"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, in string) {
		h, err := ParseBundleHeader(strings.NewReader(in))
		if err != nil {
			if !failure.Is(err, failure.SandboxOutputInvalid) {
				t.Fatalf("error without the output-invalid code: %v", err)
			}
			return
		}
		if len(h.Heads) == 0 || h.PackOffset > int64(len(in)) || h.PackOffset > maxBundleHeaderBytes || in[h.PackOffset-1] != '\n' {
			t.Fatalf("accepted header %+v of %q", h, in)
		}
		for _, p := range h.Prerequisites {
			if !isObjectID(p) {
				t.Fatalf("accepted prerequisite %q", p)
			}
		}
	})
}

func FuzzParseCommitDepth(f *testing.F) {
	for _, seed := range []string{"", "0", "12\n", " 7 ", "-1", "99999999999999999999999", "1e3", "٣"} {
		f.Add(seed, uint16(10))
	}
	f.Fuzz(func(t *testing.T, in string, maxDepth uint16) {
		budget := Budget{MaxCommitDepth: int(maxDepth)}
		depth, err := ParseCommitDepth(in, budget)
		if err != nil {
			if !failure.Is(err, failure.SandboxOutputInvalid) {
				t.Fatalf("error without the output-invalid code: %v", err)
			}
			return
		}
		if depth < 0 || depth > budget.withDefaults().MaxCommitDepth {
			t.Fatalf("accepted depth %d outside budget %d", depth, budget.withDefaults().MaxCommitDepth)
		}
	})
}

// fuzzRepoPath is the independent oracle for an accepted remote's path.
var fuzzRepoPath = regexp.MustCompile(`^/[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+\.git$`)

func FuzzValidateCredential(f *testing.F) {
	for _, seed := range []struct {
		remote, user, secret string
		ttl                  int64
	}{
		{testGitHubRemote, testPublishUser, testPublishSecret, 60},
		{"HTTPS://GitHub.com/a/b.git", "u", "s", 1},
		{"https://github.com:443/a/b.git", "u", "s", 1},
		{"https://u:p@github.com/a/b.git", "u", "s", 1},
		{"https://github.com/a/b.git?", "u", "s", 1},
		{"https://github.com/../b.git", "u", "s", 1},
		{"https://github.com/a/b.git#", "u", "s", 1},
		{"https://github.com/a/%2e.git", "u", "s", 1},
		{"https://github.com/a/b.git", "ſ", "s", 1},
		{"https://github.com/a/b.git", "u", "line\nbreak", 1},
		{"https://github.com/a/b.git", "u", "s", 0},
		{"https://github.com/a/b.git", "u", "s", -5},
		{"", "", "", 0},
	} {
		f.Add(seed.remote, seed.user, seed.secret, seed.ttl)
	}
	// Every message ValidateCredential can produce.
	var reasons strings.Builder
	for _, reason := range []string{reasonRemote, reasonUsername, reasonSecret, reasonExpired} {
		reasons.WriteString(failure.New(failure.SandboxOutputPublishForbid, "publication credential refused: %s", reason).Error() + "\n")
	}
	f.Fuzz(func(t *testing.T, remote, user, secret string, ttl int64) {
		c := Credential{RemoteURL: remote, Username: user, Secret: secret, ExpiresAt: testNow.Add(time.Duration(ttl))}
		err := ValidateCredential(c, testNow, nil)
		if err != nil {
			if !failure.Is(err, failure.SandboxOutputPublishForbid) {
				t.Fatalf("error without the publish-forbidden code: %v", err)
			}
			// The message is one of the fixed texts: the secret can only
			// appear in it by coinciding with a piece of those texts.
			if secret != "" && strings.Contains(err.Error(), secret) && !strings.Contains(reasons.String(), secret) {
				t.Fatalf("error %q carries the secret", err)
			}
			return
		}
		// Accepted: every rule holds, checked independently.
		const origin = "https://github.com"
		u, perr := url.Parse(remote)
		switch {
		case perr != nil:
			t.Fatalf("accepted unparsable remote %q: %v", remote, perr)
		case u.Scheme != "https" || !strings.EqualFold(u.Host, "github.com") || u.User != nil ||
			u.RawQuery != "" || u.ForceQuery || u.Fragment != "" || strings.ContainsAny(remote, "#%"):
			t.Fatalf("accepted remote %q outside https://github.com or with port, userinfo, query, fragment or escapes", remote)
		case len(remote) < len(origin) || !strings.EqualFold(remote[:len(origin)], origin) || remote[len(origin):] != u.Path:
			t.Fatalf("accepted remote %q that is not origin plus path", remote)
		case !fuzzRepoPath.MatchString(u.Path):
			t.Fatalf("accepted remote %q with path %q", remote, u.Path)
		case strings.Split(u.Path, "/")[1] == "." || strings.Split(u.Path, "/")[1] == "..":
			t.Fatalf("accepted remote %q with a dot-segment owner", remote)
		case len(user) < 1 || len(user) > 64 || strings.IndexFunc(user, func(r rune) bool {
			return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-')
		}) >= 0:
			t.Fatalf("accepted username %q", user)
		case secret == "" || len(secret) > MaxCredentialSecretBytes || strings.ContainsAny(secret, "\r\n\x00"):
			t.Fatalf("accepted a secret of %d bytes breaking the rules", len(secret))
		case ttl <= 0:
			t.Fatalf("accepted a credential expiring %dns from now", ttl)
		}
	})
}

func FuzzParsePackIndexIDs(f *testing.F) {
	var idx bytes.Buffer
	idx.Write([]byte{0xff, 't', 'O', 'c', 0, 0, 0, 2})
	for i := 0; i < 256; i++ {
		idx.Write([]byte{0, 0, 0, 1})
	}
	idx.Write(bytes.Repeat([]byte{0}, 20))
	f.Add(idx.Bytes(), uint8(1))
	f.Add([]byte{}, uint8(0))
	f.Fuzz(func(t *testing.T, raw []byte, want uint8) {
		ids, err := ParsePackIndexIDs(bytes.NewReader(raw), int(want))
		if err != nil {
			return
		}
		if len(ids) != int(want) {
			t.Fatalf("%d ids for %d objects", len(ids), want)
		}
		for i, id := range ids {
			if !isObjectID(id) || (i > 0 && ids[i-1] >= id) {
				t.Fatalf("accepted ids %v", ids)
			}
		}
	})
}
