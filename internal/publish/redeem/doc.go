// Package redeem turns a dispatch's publication grant into a short-lived
// push credential, the production redeemer the attempt actors take (actors.CredentialRedeemer). The operator
// chooses one of two kinds:
//
//   - Helper: a credential helper program, in the style of git's and
//     Docker's. forged executes it directly (no shell) in its own process
//     group, with a scrubbed environment and a deadline, writes the
//     redemption Request as JSON on its stdin and reads the credential
//     Response from its stdout (bounded, strictly decoded). Its stderr is
//     discarded: it may hold anything, secrets included.
//   - Endpoint: an HTTPS endpoint that is POSTed the same Request with a
//     bearer token read from an owner-only file, over verified TLS (the
//     system roots or an operator CA file), without redirects, with a
//     bounded response and a deadline.
//
// Either answer is decoded by ParseResponse and checked by
// gitops.ValidateCredential against the operator's RemotePolicy (by default
// exactly https://github.com/<owner>/<repo>.git, as strict as
// gitops.ValidateGitHubRemote). Every refusal (failure, timeout, malformed
// or invalid answer) is failure.SandboxOutputPublishForbid with a fixed
// reason that never quotes the answer, so the secret cannot reach an event,
// a log line, a ledger or a cleanup report through an error.
package redeem
