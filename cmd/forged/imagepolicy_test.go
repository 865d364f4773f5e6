package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// The image policy's settings, as the daemon reads them: none is no
// policy; each refusal names its flag.
func TestImagePolicyFlags(t *testing.T) {
	parse := func(args ...string) (*imagePolicyFlags, error) {
		var f imagePolicyFlags
		cmd := &cobra.Command{Use: "x"}
		f.register(cmd)
		return &f, cmd.ParseFlags(args)
	}
	f, err := parse()
	if err != nil {
		t.Fatal(err)
	}
	if p, err := f.policy(); err != nil || p != nil {
		t.Fatalf("no settings: %v, %v", p, err)
	}
	dir := t.TempDir()
	key := filepath.Join(dir, "key.pem")
	if out, err := exec.Command("openssl", "genpkey", "-algorithm", "ed25519", "-out", key).CombinedOutput(); err != nil {
		t.Skipf("openssl: %v %s", err, out)
	}
	scan := filepath.Join(dir, "scan")
	if err := os.WriteFile(scan, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--image-scan-fail-severity", "medium", "--image-scan-warn-severity", "high"}, "--image-scan-warn-severity"},
		{[]string{"--image-scan-fail-severity", "urgent"}, "--image-scan-fail-severity"},
		{[]string{"--image-provenance-key", key}, "--image-provenance-key"},
		{[]string{"--image-scan-command", scan}, "--image-sbom-command"},
		{[]string{"--image-sbom-command", "syft"}, "--image-sbom-command"},
	} {
		f, err := parse(tc.args...)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.policy(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.want)
		}
	}
	if err := os.Chmod(key, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = parse("--image-policy-enforced", "--image-sbom-command", scan, "--image-scan-command", scan, "--image-provenance-key", key,
		"--image-scan-allow", "CVE-1", "--image-scan-allow", "CVE-2")
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.policy()
	if err != nil || !p.Complete() {
		t.Fatalf("a complete policy: %v, %v", p, err)
	}
}
