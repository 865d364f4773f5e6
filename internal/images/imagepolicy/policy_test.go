package imagepolicy

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/buildlog"
)

const testKey = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

// fixture is an operator's policy made of test commands: the fake SBOM
// generator, a scan command answering the findings the test writes, and
// an ed25519 key in a PKCS #8 PEM file.
type fixture struct {
	dir, stateRoot, findings, keyPath string
	cfg                               Config
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{dir: dir, stateRoot: t.TempDir(), findings: filepath.Join(dir, "findings.json"), keyPath: filepath.Join(dir, "key.pem")}
	scan := filepath.Join(dir, "scan.sh")
	writeFileT(t, scan, "#!/bin/sh\n[ \"$1\" = -- ] && [ -f \"$2\" ] || exit 9\ncat \""+f.findings+"\"\n", 0o755)
	writeFileT(t, f.findings, `{"findings":[]}`, 0o644)
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	writeFileT(t, f.keyPath, string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), 0o600)
	signer, err := LoadSigner(f.keyPath)
	if err != nil {
		t.Fatal(err)
	}
	sbom, err := filepath.Abs("testdata/fake-sbom.sh")
	if err != nil {
		t.Fatal(err)
	}
	f.cfg = Config{Enforced: true, SBOMCommand: sbom, ScanCommand: scan, Thresholds: DefaultThresholds(), Signer: signer}
	return f
}

func writeFileT(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) policy(t *testing.T) *Policy {
	t.Helper()
	p, err := New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func (f *fixture) subject(imageID string) Subject {
	return Subject{
		Key: testKey, AttemptID: "attempt-1", ImageID: imageID,
		Dir: buildlog.Dir(f.stateRoot, testKey), Name: "attempt-1",
		Export: func(_ context.Context, dst string) error {
			return os.WriteFile(dst, []byte("busybox\nopenssl\n"), 0o600)
		},
		Provenance: Inputs{ImageRef: "forge/agent:" + testKey, Key: testKey, ConfigCommit: strings.Repeat("c", 40),
			ContextDigest: "sha256:" + strings.Repeat("1", 64), BaseImages: map[string]string{"busybox:1": "sha256:" + strings.Repeat("2", 64)}},
	}
}

var imageA = "sha256:" + strings.Repeat("a", 64)

func TestEvaluateAndValid(t *testing.T) {
	f := newFixture(t)
	p := f.policy(t)
	rec, err := p.Evaluate(t.Context(), f.stateRoot, f.subject(imageA))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Status != StatusPassed || rec.Verdict != VerdictPass || rec.PolicyDigest != p.Digest() || len(rec.Missing) != 0 {
		t.Fatalf("record = %+v", rec)
	}
	sbom, err := os.ReadFile(rec.SBOMPath)
	if err != nil || !strings.Contains(string(sbom), `"name":"openssl"`) || filepath.Dir(rec.SBOMPath) != buildlog.Dir(f.stateRoot, testKey) {
		t.Fatalf("SBOM %s: %s, %v", rec.SBOMPath, sbom, err)
	}
	leftovers, _ := filepath.Glob(filepath.Join(buildlog.Dir(f.stateRoot, testKey), ".tmp-*"))
	if len(leftovers) > 0 {
		t.Fatalf("the export was left behind: %v", leftovers)
	}
	if _, err := p.Valid(t.Context(), f.stateRoot, testKey, imageA); err != nil {
		t.Fatalf("a fresh record is not valid: %v", err)
	}
	st, err := f.cfg.Signer.VerifyEnvelope(t.Context(), mustRead(t, rec.ProvenancePath))
	if err != nil {
		t.Fatal(err)
	}
	if st.Subject[0].Digest["sha256"] != strings.Repeat("a", 64) || len(st.Predicate.RunDetails.Byproducts) != 1 {
		t.Fatalf("statement = %+v", st)
	}

	// Each of these makes the record invalid for a cache hit.
	if _, err := p.Valid(t.Context(), f.stateRoot, testKey, "sha256:"+strings.Repeat("b", 64)); err == nil {
		t.Error("a record of another image was valid")
	}
	other := *f
	other.cfg.Thresholds = Thresholds{Fail: SeverityCritical, Warn: SeverityLow}
	if _, err := other.policy(t).Valid(t.Context(), f.stateRoot, testKey, imageA); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Errorf("a record of another policy was valid: %v", err)
	}
	restore := tamper(t, rec.SBOMPath, func(b []byte) []byte { return append(b, ' ') })
	if _, err := p.Valid(t.Context(), f.stateRoot, testKey, imageA); err == nil || !strings.Contains(err.Error(), "SBOM") {
		t.Errorf("a changed SBOM was valid: %v", err)
	}
	restore()
	restore = tamper(t, rec.ProvenancePath, func(b []byte) []byte {
		var env map[string]any
		if err := json.Unmarshal(b, &env); err != nil {
			t.Fatal(err)
		}
		payload, _ := base64.StdEncoding.DecodeString(env["payload"].(string))
		env["payload"] = base64.StdEncoding.EncodeToString([]byte(strings.Replace(string(payload), "busybox:1", "busybox:2", 1)))
		out, _ := json.Marshal(env)
		return out
	})
	// The record's digest of the envelope no longer matches; with the
	// record rewritten to the tampered envelope's digest, the signature
	// does not verify.
	if _, err := p.Valid(t.Context(), f.stateRoot, testKey, imageA); err == nil {
		t.Error("a tampered provenance was valid")
	}
	rec2 := rec
	rec2.ProvenanceDigest = DigestBytes(mustRead(t, rec.ProvenancePath))
	if err := SaveRecord(f.stateRoot, rec2); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Valid(t.Context(), f.stateRoot, testKey, imageA); err == nil || !strings.Contains(err.Error(), "signature") && !strings.Contains(err.Error(), "verif") {
		t.Errorf("a re-recorded tampered provenance was valid: %v", err)
	}
	restore()
	if err := RemoveRecord(f.stateRoot, testKey); err != nil {
		t.Fatal(err)
	}
	if _, err := p.Valid(t.Context(), f.stateRoot, testKey, imageA); !errors.Is(err, ErrNoRecord) {
		t.Errorf("no record: %v", err)
	}
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func tamper(t *testing.T, path string, change func([]byte) []byte) (restore func()) {
	t.Helper()
	orig := mustRead(t, path)
	writeFileT(t, path, string(change(orig)), 0o600)
	return func() { writeFileT(t, path, string(orig), 0o600) }
}

func TestEvaluateGate(t *testing.T) {
	f := newFixture(t)
	p := f.policy(t)
	writeFileT(t, f.findings, `{"findings":[{"id":"CVE-L","severity":"low"}]}`, 0o644)
	rec, err := p.Evaluate(t.Context(), f.stateRoot, f.subject(imageA))
	if err != nil || rec.Status != StatusWarning || rec.Verdict != VerdictWarn {
		t.Fatalf("a low finding: %+v, %v", rec, err)
	}
	writeFileT(t, f.findings, `{"findings":[{"id":"CVE-H","package":"openssl","severity":"high"}]}`, 0o644)
	_, err = p.Evaluate(t.Context(), f.stateRoot, f.subject(imageA))
	if failure.CodeOf(err) != failure.SandboxImageVulnerable || !strings.Contains(err.Error(), "CVE-H (high, openssl)") {
		t.Fatalf("a high finding: %v", err)
	}
	if _, err := p.Valid(t.Context(), f.stateRoot, testKey, imageA); err == nil {
		t.Fatal("the record of a failed scan was valid")
	}
	for name, answer := range map[string]string{
		"out of shape": `{"vulns":[]}`,
		"not JSON":     `CVE-1 high`,
	} {
		writeFileT(t, f.findings, answer, 0o644)
		_, err := p.Evaluate(t.Context(), f.stateRoot, f.subject(imageA))
		if failure.CodeOf(err) != failure.SandboxImagePolicy || !strings.Contains(err.Error(), "scan command") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// A scan command that fails names its exit and its stderr.
	writeFileT(t, f.cfg.ScanCommand, "#!/bin/sh\necho 'database missing' >&2\nexit 4\n", 0o755)
	_, err = New(f.cfg) // the command's digest changed: a new policy
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.policy(t).Evaluate(t.Context(), f.stateRoot, f.subject(imageA))
	if failure.CodeOf(err) != failure.SandboxImagePolicy || !strings.Contains(err.Error(), "exit status 4") || !strings.Contains(err.Error(), "database missing") {
		t.Errorf("a failing scan command: %v", err)
	}
	// An SBOM command writing no CycloneDX document.
	bad := filepath.Join(f.dir, "bad-sbom.sh")
	writeFileT(t, bad, "#!/bin/sh\necho '{}' > \"${4#cyclonedx-json=}\"\n", 0o755)
	cfg := f.cfg
	cfg.SBOMCommand = bad
	bp, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := bp.Evaluate(t.Context(), f.stateRoot, f.subject(imageA)); failure.CodeOf(err) != failure.SandboxImagePolicy || !strings.Contains(err.Error(), "CycloneDX") {
		t.Errorf("an SBOM that is not CycloneDX: %v", err)
	}
}

func TestPolicyDigestAndParts(t *testing.T) {
	f := newFixture(t)
	p := f.policy(t)
	if !p.Complete() || len(p.Missing()) != 0 || !strings.HasPrefix(p.Digest(), "sha256:") {
		t.Fatalf("policy: complete %v, missing %v, digest %q", p.Complete(), p.Missing(), p.Digest())
	}
	if f.policy(t).Digest() != p.Digest() {
		t.Fatal("the digest is not stable")
	}
	if p2, _ := New(Config{}); p2 != nil || p2.Enforced() || p2.Digest() != "" || p2.CheckRequired(true) != nil {
		t.Fatal("an empty configuration is no policy")
	}
	partial := f.cfg
	partial.ScanCommand, partial.Signer = "", nil
	pp, err := New(partial)
	if err != nil {
		t.Fatal(err)
	}
	if pp.Complete() || strings.Join(pp.Missing(), ",") != "scan,provenance" {
		t.Fatalf("missing = %v", pp.Missing())
	}
	if err := pp.CheckRequired(true); failure.CodeOf(err) != failure.SandboxImagePolicy || !strings.Contains(err.Error(), "scan, provenance") {
		t.Errorf("sandbox_required under an incomplete enforced policy: %v", err)
	}
	if err := pp.CheckRequired(false); err != nil {
		t.Errorf("adoption under an incomplete enforced policy: %v", err)
	}
	rec, err := pp.Evaluate(t.Context(), f.stateRoot, f.subject(imageA))
	if err != nil || rec.Status != StatusWarning || rec.SBOMDigest == "" || rec.ProvenancePath != "" {
		t.Fatalf("an adoption record under an incomplete policy: %+v, %v", rec, err)
	}
	noSBOM := f.cfg
	noSBOM.SBOMCommand = ""
	if _, err := New(noSBOM); err == nil || !strings.Contains(err.Error(), "--image-sbom-command") {
		t.Errorf("a scan without an SBOM: %v", err)
	}
	relative := f.cfg
	relative.ScanCommand = "scan.sh"
	if _, err := New(relative); err == nil {
		t.Error("a relative scan command was accepted")
	}
}

func TestLoadSignerRefuses(t *testing.T) {
	dir := t.TempDir()
	open := filepath.Join(dir, "open.pem")
	f := newFixture(t)
	writeFileT(t, open, string(mustRead(t, f.keyPath)), 0o644)
	if _, err := LoadSigner(open); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a key readable by others: %v", err)
	}
	notKey := filepath.Join(dir, "not.pem")
	writeFileT(t, notKey, "hello", 0o600)
	if _, err := LoadSigner(notKey); err == nil || !strings.Contains(err.Error(), "PKCS #8") {
		t.Errorf("not a key: %v", err)
	}
}

// The envelope verifies with openssl alone, over a PAE this test builds
// by hand from DSSE's specification; a changed payload does not.
func TestProvenanceVerifiesWithOpenSSL(t *testing.T) {
	if _, err := exec.LookPath("openssl"); err != nil {
		t.Skip("no openssl")
	}
	f := newFixture(t)
	in := f.subject(imageA).Provenance
	in.ImageID = imageA
	st := NewStatement(in)
	data, err := f.cfg.Signer.SignStatement(t.Context(), st)
	if err != nil {
		t.Fatal(err)
	}
	var env struct {
		PayloadType, Payload string
		Signatures           []struct{ KeyID, Sig string }
	}
	if err := json.Unmarshal(data, &env); err != nil {
		t.Fatal(err)
	}
	payload, _ := base64.StdEncoding.DecodeString(env.Payload)
	sig, _ := base64.StdEncoding.DecodeString(env.Signatures[0].Sig)
	dir := t.TempDir()
	pub := filepath.Join(dir, "pub.pem")
	if out, err := exec.Command("openssl", "pkey", "-in", f.keyPath, "-pubout", "-out", pub).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	verify := func(payload []byte) error {
		pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(env.PayloadType), env.PayloadType, len(payload), payload)
		writeFileT(t, filepath.Join(dir, "pae.bin"), string(pae), 0o600)
		writeFileT(t, filepath.Join(dir, "sig.bin"), string(sig), 0o600)
		out, err := exec.Command("openssl", "pkeyutl", "-verify", "-pubin", "-inkey", pub, "-rawin",
			"-in", filepath.Join(dir, "pae.bin"), "-sigfile", filepath.Join(dir, "sig.bin")).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	if env.PayloadType != PayloadType {
		t.Fatalf("payload type %q", env.PayloadType)
	}
	if err := verify(payload); err != nil {
		t.Fatalf("openssl refused forged's envelope: %v", err)
	}
	tampered := strings.Replace(string(payload), strings.Repeat("a", 64), strings.Repeat("b", 64), 1)
	if tampered == string(payload) {
		t.Fatal("the payload does not name the image")
	}
	if err := verify([]byte(tampered)); err == nil {
		t.Fatal("openssl verified a tampered payload")
	}
	// The signature covers the PAE, not the bare payload.
	pae := fmt.Appendf(nil, "DSSEv1 %d %s %d %s", len(env.PayloadType), env.PayloadType, len(payload), payload)
	pubKey := f.cfg.Signer.Public().(ed25519.PublicKey)
	if !ed25519.Verify(pubKey, pae, sig) || ed25519.Verify(pubKey, payload, sig) {
		t.Fatal("the signature is not over the PAE alone")
	}
}

// FuzzDecodeRecord holds the record decoder to its contract: no panic,
// and an accepted record is of the key asked for, in the current schema.
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"key":"`+testKey+`","imageId":"sha256:x","policyDigest":"sha256:y","status":"passed","attemptId":"a"}`), testKey)
	f.Add([]byte(`{"schemaVersion":2,"key":"k"}`), "k")
	f.Fuzz(func(t *testing.T, data []byte, key string) {
		r, err := decodeRecord(data, key)
		if err == nil && (r.Key != key || r.Schema != RecordSchema) {
			t.Fatalf("accepted %+v for key %q", r, key)
		}
	})
}
