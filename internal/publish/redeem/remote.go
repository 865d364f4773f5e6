package redeem

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/forgedev/forged/failure"
)

// DefaultHost is the one publication host allowed when none is configured.
const DefaultHost = "github.com"

var (
	// remotePath is the only path shape a publication remote may have:
	// /<owner>/<repo>.git of [A-Za-z0-9_.-], as gitops.ValidateGitHubRemote
	// requires for GitHub.
	remotePath = regexp.MustCompile(`^/([A-Za-z0-9_.-]+)/[A-Za-z0-9_.-]+\.git$`)
	// hostName is an allowed host as configured: a DNS name or IPv4
	// address of [A-Za-z0-9.-], optionally with a port.
	hostName = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)
	// ownerName is an allowed owner as configured.
	ownerName = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,100}$`)
)

// RemotePolicy says which remotes a redeemed credential may push to. A
// remote is accepted only if it is exactly
// https://<host>/<owner>/<repo>.git where the scheme is https in any case,
// <host> is one of Hosts (compared without regard to case; an entry with a
// port admits exactly that port, an entry without one admits no port, not
// even an empty one), <owner> and <repo> are made of [A-Za-z0-9_.-] (the
// owner not "." or ".."), and, when Owners is not empty, <owner> is one of
// Owners (without regard to case, as GitHub compares them). Case is
// ignored for ASCII letters only. Userinfo,
// queries and fragments (even empty), percent-escapes, dot segments,
// further path segments and surrounding whitespace are refused.
//
// The zero RemotePolicy allows github.com only: exactly what
// gitops.ValidateGitHubRemote accepts.
type RemotePolicy struct {
	// Hosts are the allowed hosts, "name" or "name:port" (default
	// github.com).
	Hosts []string
	// Owners, when not empty, restricts the owner path segment.
	Owners []string
}

// NewRemotePolicy checks and normalises a configured policy: every host
// is a DNS name or IPv4 address with an optional port in 1-65535, every
// owner a valid owner segment. Empty Hosts means DefaultHost.
func NewRemotePolicy(hosts, owners []string) (RemotePolicy, error) {
	p := RemotePolicy{}
	for _, h := range hosts {
		h = strings.ToLower(strings.TrimSpace(h))
		if h == "" {
			continue
		}
		name, port, hasPort := strings.Cut(h, ":")
		validPort := func() bool {
			n, err := strconv.Atoi(port)
			return err == nil && n >= 1 && n <= 65535 && strconv.Itoa(n) == port
		}
		if !hostName.MatchString(name) || strings.Contains(name, "..") || (hasPort && !validPort()) {
			return RemotePolicy{}, fmt.Errorf("publication allowed host %q is not a host name or IPv4 address with an optional :port in 1-65535 (not a URL; IPv6 literals are not supported)", h)
		}
		p.Hosts = append(p.Hosts, h)
	}
	for _, o := range owners {
		o = strings.TrimSpace(o)
		if o == "" {
			continue
		}
		if !ownerName.MatchString(o) || o == "." || o == ".." {
			return RemotePolicy{}, fmt.Errorf("publication allowed owner %q is not of [A-Za-z0-9_.-]", o)
		}
		p.Owners = append(p.Owners, o)
	}
	return p, nil
}

// hosts is the effective host list.
func (p RemotePolicy) hosts() []string {
	if len(p.Hosts) == 0 {
		return []string{DefaultHost}
	}
	return p.Hosts
}

// Validate is the policy as a gitops.RemoteValidator. A refusal is
// failure.SandboxOutputPublishForbid and does not quote the URL (it may
// carry userinfo).
func (p RemotePolicy) Validate(remoteURL string) error {
	refuse := failure.New(failure.SandboxOutputPublishForbid,
		"publication remote is not https://<allowed host>/<owner>/<repo>.git (allowed hosts: %s)", strings.Join(p.hosts(), ", "))
	const scheme = "https://"
	if len(remoteURL) < len(scheme) || !asciiEqualFold(remoteURL[:len(scheme)], scheme) {
		return refuse
	}
	rest := remoteURL[len(scheme):]
	slash := strings.IndexByte(rest, '/')
	if slash < 0 {
		return refuse
	}
	authority, path := rest[:slash], rest[slash:]
	if !p.hostAllowed(authority) {
		return refuse
	}
	m := remotePath.FindStringSubmatch(path)
	if m == nil || m[1] == "." || m[1] == ".." {
		return refuse
	}
	if len(p.Owners) > 0 && !containsFold(p.Owners, m[1]) {
		return failure.New(failure.SandboxOutputPublishForbid, "publication remote's owner is not one of the allowed owners")
	}
	return nil
}

// hostAllowed compares the URL's authority with the allowed hosts: the
// whole authority (name and port) must equal one entry.
func (p RemotePolicy) hostAllowed(authority string) bool {
	return containsFold(p.hosts(), authority)
}

// containsFold reports whether list holds s, ignoring ASCII case only:
// Unicode folding would let "ſ" (U+017F) stand for "s" or "K" (U+212A)
// for "k".
func containsFold(list []string, s string) bool {
	for _, x := range list {
		if asciiEqualFold(x, s) {
			return true
		}
	}
	return false
}

// asciiEqualFold is strings.EqualFold restricted to ASCII letters: any
// byte outside ASCII must match exactly.
func asciiEqualFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lowerASCII(a[i]) != lowerASCII(b[i]) {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
