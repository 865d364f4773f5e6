package redeem

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/gitops"
	"github.com/forgedev/forged/messages"
)

// maxTokenBytes bounds the bearer token file.
const maxTokenBytes = 4 << 10

// Endpoint redeems grants by POSTing the request to an HTTPS endpoint.
type Endpoint struct {
	// URL is the endpoint (https, no userinfo or fragment).
	URL string
	// TokenFile holds the bearer token. It is read for every redemption,
	// so that it can be rotated, and must be a regular file only its owner
	// (this process's user) can read or write.
	TokenFile string
	// Timeout bounds one redemption, connection and body included
	// (DefaultTimeout when zero).
	Timeout time.Duration
	// Policy vets the redeemed remote.
	Policy RemotePolicy
	// Now is the clock for the credential's expiry (time.Now when nil).
	Now func() time.Time

	client *http.Client
}

// NewEndpoint checks the endpoint's configuration: an https URL without
// userinfo or fragment, a token file that readToken accepts, and, when
// caFile is set, a PEM file of at least one certificate, which then is the
// only trusted root (the system roots otherwise). TLS 1.2 is the minimum
// and redirects are never followed.
func NewEndpoint(rawURL, tokenFile, caFile string, timeout time.Duration, policy RemotePolicy) (*Endpoint, error) {
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil || u.Fragment != "" || u.Opaque != "" {
		return nil, errors.New("publication endpoint: must be an https://host/path URL without userinfo or fragment")
	}
	if tokenFile == "" {
		return nil, errors.New("publication endpoint: a bearer token file is required")
	}
	if _, err := readToken(tokenFile); err != nil {
		return nil, err
	}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("publication endpoint CA file: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("publication endpoint CA file %s: no PEM certificate", caFile)
		}
		tlsConfig.RootCAs = pool
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.TLSClientConfig = tlsConfig
	return &Endpoint{
		URL: rawURL, TokenFile: tokenFile, Timeout: timeout, Policy: policy,
		client: &http.Client{
			Transport: transport,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
	}, nil
}

// readToken reads the bearer token: a regular file (symlinks are
// followed), owned by this process's user, with no permission for group or
// others, at most 4 KiB, holding one token of printable ASCII without
// spaces (surrounding whitespace is trimmed).
func readToken(path string) (string, error) {
	refuse := func(format string, args ...any) (string, error) {
		return "", fmt.Errorf("publication endpoint token file %s: "+format, append([]any{path}, args...)...)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("publication endpoint token file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("publication endpoint token file: %w", err)
	}
	switch {
	case !info.Mode().IsRegular():
		return refuse("not a regular file")
	case info.Mode().Perm()&0o077 != 0:
		return refuse("mode %04o: group and others must have no access (chmod 600)", info.Mode().Perm())
	case info.Size() > maxTokenBytes:
		return refuse("longer than %d bytes", maxTokenBytes)
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return refuse("owned by uid %d, not by this process's uid %d", st.Uid, os.Getuid())
	}
	raw, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
	if err != nil {
		return "", fmt.Errorf("publication endpoint token file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if token == "" || len(raw) > maxTokenBytes {
		return refuse("empty or longer than %d bytes", maxTokenBytes)
	}
	for i := 0; i < len(token); i++ {
		if token[i] <= ' ' || token[i] >= 0x7f {
			return refuse("the token holds a space, a control or a non-ASCII byte")
		}
	}
	return token, nil
}

// Redeem POSTs the request as JSON with the bearer token and decodes a 200
// answer (see ParseResponse), then validates the credential (see
// gitops.ValidateCredential) against the policy. An unreadable token, a
// transport or TLS failure, any other status (redirects included), an
// answer over MaxResponseBytes or the timeout is refused with
// failure.SandboxOutputPublishForbid; the reason never quotes the body.
func (e *Endpoint) Redeem(ctx context.Context, req messages.PublicationRequest) (gitops.Credential, error) {
	refuse := func(cause error, format string, args ...any) (gitops.Credential, error) {
		// The message is curated (the URL and the body are never quoted): the
		// cause stays in the chain but is not rendered.
		return gitops.Credential{}, failure.WrapWithheld(failure.SandboxOutputPublishForbid, cause, "publication grant redemption: endpoint "+format, args...)
	}
	token, err := readToken(e.TokenFile)
	if err != nil {
		return refuse(err, "token: %v", err)
	}
	body, err := json.Marshal(NewRequest(req))
	if err != nil {
		return refuse(err, "encode the request")
	}
	timeout := e.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	reqCtx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	httpReq, err := http.NewRequestWithContext(reqCtx, http.MethodPost, e.URL, bytes.NewReader(body))
	if err != nil {
		return refuse(err, "request: %v", err)
	}
	httpReq.Header.Set("Content-Type", "application/json")
	httpReq.Header.Set("Accept", "application/json")
	httpReq.Header.Set("Authorization", "Bearer "+token)
	client := e.client
	if client == nil {
		client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	res, err := client.Do(httpReq)
	if err != nil {
		return refuse(err, "unreachable: %v", transportCause(err, ctx, reqCtx, timeout))
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		return refuse(nil, "answered HTTP %d", res.StatusCode)
	}
	answer, err := io.ReadAll(io.LimitReader(res.Body, MaxResponseBytes+1))
	if err != nil {
		return refuse(err, "reading the answer: %v", transportCause(err, ctx, reqCtx, timeout))
	}
	if reqCtx.Err() != nil {
		// An answer that completed past the deadline (the transport can
		// still hand over a response its cancellation raced with) is not
		// trusted: the redemption timed out.
		return refuse(reqCtx.Err(), "unreachable: %v", transportCause(reqCtx.Err(), ctx, reqCtx, timeout))
	}
	if len(answer) > MaxResponseBytes {
		return refuse(errOverflow, "answered more than %d bytes", MaxResponseBytes)
	}
	return finish(answer, e.Now, e.Policy)
}

// transportCause is a transport error without the *url.Error wrapping
// (which repeats the URL), or the deadline that ended it.
func transportCause(err error, parent, reqCtx context.Context, timeout time.Duration) error {
	switch {
	case parent.Err() != nil:
		return fmt.Errorf("cancelled: %w", parent.Err())
	case errors.Is(reqCtx.Err(), context.DeadlineExceeded):
		return fmt.Errorf("timed out after %s", timeout)
	}
	var urlErr *url.Error
	if errors.As(err, &urlErr) {
		return urlErr.Err
	}
	return err
}
