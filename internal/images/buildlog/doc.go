// Package buildlog keeps an image build's output restricted: every line is
// redacted (environment-style secrets, well-known token shapes, URLs with
// credentials and the attempt's own secret values), the whole log is
// bounded at MaxBytes, and it is stored 0600 under the state root with its
// sha256 digest. Only a bounded tail and the digest leave the host in
// events.
//
// Redaction is line by line: a secret split across two lines of output is
// not recognised, and the exact-value pass only knows the values it was
// given.
package buildlog
