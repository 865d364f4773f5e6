// Package imagepolicy is the image policy of sandbox images: for every
// image forged builds, an SBOM generated offline from the image's
// filesystem, a vulnerability gate over it, a signed provenance statement,
// and the record that ties the three to the image and to the policy.
//
// The SBOM generator and the vulnerability scanner are the operator's
// programs. forged runs them like its other helpers (procgroup: no shell,
// its own process group, a minimal environment, a deadline):
//
//   - the SBOM command is syft-compatible: forged runs
//     `CMD scan docker-archive:IMAGE.tar --output cyclonedx-json=OUT`
//     on the image exported through the Engine API, and stores OUT (CycloneDX
//     JSON) beside the build log;
//   - the scan command receives `-- SBOM` and answers on stdout with the
//     findings in the documented shape (Findings); the threshold policy
//     (Thresholds: fail and warn severities, an allowlist of IDs) is
//     forged's.
//
// The provenance is an in-toto Statement v1 with a SLSA provenance v1
// predicate naming the image's inputs, in a DSSE envelope whose signature
// (ed25519, the operator's key) covers DSSE's pre-authentication encoding.
//
// A Record per image key holds the SBOM's, the provenance's and the
// policy's own digests and the scan verdict; under an enforced policy a
// cache hit needs a valid one.
package imagepolicy
