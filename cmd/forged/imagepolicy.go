package main

import (
	"time"

	"github.com/spf13/cobra"

	"github.com/forgedev/forged/internal/images/imagepolicy"
)

// imagePolicyFlags are the image policy's settings (docs/image-policy.md).
type imagePolicyFlags struct {
	enforced     bool
	sbomCommand  string
	scanCommand  string
	failSeverity string
	warnSeverity string
	allow        []string
	key          string
	timeout      time.Duration
}

func (f *imagePolicyFlags) register(cmd *cobra.Command) {
	def := imagepolicy.DefaultThresholds()
	cmd.Flags().BoolVar(&f.enforced, "image-policy-enforced", false, "a cache hit needs a valid image policy record (else the image is rebuilt), and sandbox_required needs the whole policy: SBOM, scan and provenance key")
	cmd.Flags().StringVar(&f.sbomCommand, "image-sbom-command", "", "absolute path of a syft-compatible SBOM generator, run offline on every built image (scan docker-archive:TAR --output cyclonedx-json=OUT)")
	cmd.Flags().StringVar(&f.scanCommand, "image-scan-command", "", "absolute path of a vulnerability scan command: the SBOM's path in, findings JSON out (see docs/image-policy.md); needs --image-sbom-command")
	cmd.Flags().StringVar(&f.failSeverity, "image-scan-fail-severity", def.Fail.String(), "a finding at or above this severity (critical, high, medium, low, negligible, unknown) fails the image with sandbox_image_vulnerable")
	cmd.Flags().StringVar(&f.warnSeverity, "image-scan-warn-severity", def.Warn.String(), "a finding at or above this severity, below the fail severity, makes the image policy's verdict a warning")
	cmd.Flags().StringArrayVar(&f.allow, "image-scan-allow", nil, "vulnerability ID the gate ignores (repeatable)")
	cmd.Flags().StringVar(&f.key, "image-provenance-key", "", "ed25519 private key (PKCS #8 PEM, mode 0600) that signs every built image's provenance (in-toto, DSSE)")
	cmd.Flags().DurationVar(&f.timeout, "image-policy-timeout", imagepolicy.DefaultTimeout, "deadline of one SBOM generation, and of one scan")
}

// policy checks the settings; nil is no image policy.
func (f *imagePolicyFlags) policy() (*imagepolicy.Policy, error) {
	thresholds, err := imagepolicy.NewThresholds(f.failSeverity, f.warnSeverity, f.allow)
	if err != nil {
		return nil, err
	}
	cfg := imagepolicy.Config{Enforced: f.enforced, SBOMCommand: f.sbomCommand, ScanCommand: f.scanCommand, Thresholds: thresholds, Timeout: f.timeout}
	if f.key != "" {
		signer, err := imagepolicy.LoadSigner(f.key)
		if err != nil {
			return nil, err
		}
		cfg.Signer = signer
	}
	return imagepolicy.New(cfg)
}
