// Package remoteurl parses and normalises the git remote URL a dispatch
// names in repo.remote. It is deliberately narrow: a URL either has one
// obvious meaning to git and to forged, or it is refused.
//
// Accepted: scheme://[user@]host[:port]/path for https, http, ssh and git,
// and file:///absolute/path. Refused, among others: git's transport
// syntax (ext::, fd::), scp-like host:path, anything starting with '-',
// credentials (a password anywhere; any user name outside ssh), queries
// and fragments, percent-encoding, whitespace and control characters,
// empty, "." and ".." path segments. Which of the schemes a member fetches
// is the operator's choice (gitops.RemotePolicy), not this package's.
package remoteurl

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// The schemes forged knows; each is also the name of git's protocol
// (protocol.<name>.allow).
const (
	HTTPS = "https"
	HTTP  = "http"
	SSH   = "ssh"
	Git   = "git"
	File  = "file"
)

// Schemes lists the known schemes.
var Schemes = []string{HTTPS, HTTP, SSH, Git, File}

// MaxLen bounds a remote URL.
const MaxLen = 2048

// defaultPorts are dropped by normalisation.
var defaultPorts = map[string]string{HTTPS: "443", HTTP: "80", SSH: "22", Git: "9418"}

// URL is a parsed, normalised remote URL.
type URL struct {
	// Scheme is one of Schemes, lowercase.
	Scheme string
	// User is the ssh user name ("" otherwise).
	User string
	// Host is the lowercase host name or IP address (IPv6 without
	// brackets); "" for file.
	Host string
	// Port is the port when it is not the scheme's default.
	Port string
	// Path is the absolute path, without a trailing slash.
	Path string
}

// String is the normalised URL: equal strings name the same remote.
func (u URL) String() string {
	if u.Scheme == File {
		return "file://" + u.Path
	}
	var b strings.Builder
	b.WriteString(u.Scheme)
	b.WriteString("://")
	if u.User != "" {
		b.WriteString(u.User)
		b.WriteByte('@')
	}
	if strings.Contains(u.Host, ":") {
		b.WriteString("[" + u.Host + "]")
	} else {
		b.WriteString(u.Host)
	}
	if u.Port != "" {
		b.WriteByte(':')
		b.WriteString(u.Port)
	}
	b.WriteString(u.Path)
	return b.String()
}

// Key is the stable name of the remote's mirror: the first 32 hex digits
// of the SHA-256 of the normalised URL.
func (u URL) Key() string {
	sum := sha256.Sum256([]byte(u.String()))
	return hex.EncodeToString(sum[:16])
}

// IsKey reports whether s has the shape of a Key.
func IsKey(s string) bool {
	if len(s) != 32 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Parse checks raw and returns it normalised (see the package comment).
// Errors say what is wrong without repeating the URL, which may carry a
// secret.
func Parse(raw string) (URL, error) {
	switch {
	case raw == "":
		return URL{}, errors.New("is empty")
	case len(raw) > MaxLen:
		return URL{}, fmt.Errorf("is longer than %d bytes", MaxLen)
	case raw[0] == '-':
		return URL{}, errors.New("must not start with '-'")
	}
	for i := 0; i < len(raw); i++ {
		if c := raw[i]; c <= ' ' || c >= 0x7f || c == '\\' {
			return URL{}, errors.New("must be printable ASCII without spaces or backslashes")
		}
	}
	if strings.ContainsAny(raw, "?#") {
		return URL{}, errors.New("must have no query or fragment")
	}
	if strings.Contains(raw, "%") {
		return URL{}, errors.New("must not be percent-encoded")
	}
	scheme, rest, ok := strings.Cut(raw, "://")
	if !ok {
		if strings.Contains(raw, "::") {
			return URL{}, errors.New("uses git's transport syntax (<transport>::<address>), which forged never runs")
		}
		return URL{}, errors.New("must be a scheme://host/path URL (scp-like host:path is not accepted)")
	}
	scheme = strings.ToLower(scheme)
	if !known(scheme) {
		return URL{}, fmt.Errorf("scheme must be one of %s", strings.Join(Schemes, ", "))
	}
	parsed, err := url.Parse(scheme + "://" + rest)
	if err != nil || parsed.Opaque != "" || parsed.RawPath != "" {
		return URL{}, errors.New("is not a well-formed URL")
	}
	u := URL{Scheme: scheme}
	if err := u.setUser(parsed.User); err != nil {
		return URL{}, err
	}
	if err := u.setHost(parsed); err != nil {
		return URL{}, err
	}
	if err := u.setPath(parsed.Path); err != nil {
		return URL{}, err
	}
	return u, nil
}

func known(scheme string) bool {
	for _, s := range Schemes {
		if s == scheme {
			return true
		}
	}
	return false
}

func (u *URL) setUser(info *url.Userinfo) error {
	if info == nil {
		return nil
	}
	if _, hasPassword := info.Password(); hasPassword {
		return errors.New("carries a password: credentials never travel in repo.remote")
	}
	if u.Scheme != SSH {
		return errors.New("carries a user name: only ssh URLs may name one (credentials never travel in repo.remote)")
	}
	name := info.Username()
	if name == "" || name[0] == '-' || !isWord(name) {
		return errors.New("has an invalid ssh user name")
	}
	u.User = name
	return nil
}

func (u *URL) setHost(p *url.URL) error {
	host, port := strings.ToLower(p.Hostname()), p.Port()
	if u.Scheme == File {
		if p.Host != "" {
			return errors.New("file URLs name no host: file:///absolute/path")
		}
		return nil
	}
	if strings.HasSuffix(p.Host, ":") && port == "" {
		return errors.New("has an empty port")
	}
	switch {
	case host == "":
		return errors.New("names no host")
	case host[0] == '-':
		return errors.New("host must not start with '-'")
	case strings.Contains(host, ":"):
		if ip := net.ParseIP(host); ip == nil || ip.To4() != nil {
			return errors.New("has an invalid IPv6 address")
		}
		host = net.ParseIP(host).String()
	case !isHostName(host):
		return errors.New("has an invalid host name")
	}
	if port != "" {
		n, err := strconv.Atoi(port)
		if err != nil || n < 1 || n > 65535 {
			return errors.New("has an invalid port")
		}
		port = strconv.Itoa(n)
		if defaultPorts[u.Scheme] == port {
			port = ""
		}
	}
	u.Host, u.Port = host, port
	return nil
}

func (u *URL) setPath(path string) error {
	path = strings.TrimRight(path, "/")
	if path == "" || path[0] != '/' {
		return errors.New("names no repository path")
	}
	for _, seg := range strings.Split(path[1:], "/") {
		switch {
		case seg == "":
			return errors.New("has an empty path segment")
		case seg == "." || seg == "..":
			return errors.New("has a '.' or '..' path segment")
		case !isPathSegment(seg):
			return errors.New("path segments must be of [A-Za-z0-9._~+@-]")
		}
	}
	u.Path = path
	return nil
}

func isWord(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return s != ""
}

func isPathSegment(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("._~+@-", c) >= 0) {
			return false
		}
	}
	return s != ""
}

// isHostName accepts DNS names (lowercase labels of letters, digits and
// inner hyphens) and dotted IPv4 addresses.
func isHostName(s string) bool {
	if len(s) > 253 {
		return false
	}
	for _, label := range strings.Split(s, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for i := 0; i < len(label); i++ {
			c := label[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
				return false
			}
		}
	}
	return true
}

// ParseProtocols checks an operator's list of allowed protocols: each one
// of Schemes, no repeats. The result is in the list's order.
func ParseProtocols(list []string) ([]string, error) {
	out := make([]string, 0, len(list))
	seen := map[string]bool{}
	for _, p := range list {
		p = strings.ToLower(strings.TrimSpace(p))
		if !known(p) {
			return nil, fmt.Errorf("remote protocol %q: must be one of %s", p, strings.Join(Schemes, ", "))
		}
		if seen[p] {
			return nil, fmt.Errorf("remote protocol %q is listed twice", p)
		}
		seen[p] = true
		out = append(out, p)
	}
	return out, nil
}
