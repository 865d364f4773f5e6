package httpapi

import (
	"mime"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// The request guard. The socket's peer check (Listen) says which local
// users may connect, but a browser on the operator's machine is such a
// user once the socket is forwarded (the console's `ssh -L` recipe): a web
// page that rebinds its own DNS name to 127.0.0.1 could then read the API
// and, through a simple cross-origin POST, submit dispatches. The guard
// refuses what only such a page sends, before any route runs:
//
//   - a Host that is not a name the daemon answers to: `localhost`, a
//     loopback address (127.0.0.0/8, ::1) with any port, the socket name
//     the CLI and package client send (messages.APISocketHost), or one of
//     the operator's extra names (--api-allowed-host). A rebinding page
//     sends its own name (evil.example:8080).
//   - an Origin that is not the request's own Host (a page of another
//     origin), or a `Sec-Fetch-Site` of cross-site or same-site.
//   - a state-changing request (anything but GET, HEAD and OPTIONS)
//     without `Content-Type: application/json` and the X-Forged-Client
//     header: a page of another origin can send neither without a CORS
//     preflight, which the daemon never grants.

// guard wraps next with the request guard; extraHosts are the operator's
// extra Host names or addresses (compared case-insensitively, any port;
// see ValidHostName).
func guard(next http.Handler, extraHosts []string) http.Handler {
	allowed := make([]string, 0, len(extraHosts)+2)
	allowed = append(allowed, "localhost", messages.APISocketHost)
	for _, h := range extraHosts {
		allowed = append(allowed, strings.ToLower(h))
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !hostAllowed(r.Host, allowed) {
			writeRefusal(w, failure.APIHostRefused, "the request's Host is not a name this daemon answers to: use localhost, a loopback address or "+messages.APISocketHost+", or add the name with --api-allowed-host")
			return
		}
		if !sameOrigin(r) {
			writeRefusal(w, failure.APIOriginRefused, "the request comes from a page of another origin; the daemon serves only its own console and local clients")
			return
		}
		switch r.Method {
		case http.MethodGet, http.MethodHead, http.MethodOptions:
		default:
			if !isJSON(r.Header.Get("Content-Type")) || r.Header.Get(messages.APIClientHeader) == "" {
				writeRefusal(w, failure.APIClientRequired, "a "+r.Method+" request needs the headers Content-Type: application/json and "+messages.APIClientHeader+": "+messages.APIClientValue)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// hostAllowed reports whether a request's Host names the daemon: one of
// allowed, or a loopback address, with any port or none.
func hostAllowed(hostport string, allowed []string) bool {
	host := hostport
	if h, _, err := net.SplitHostPort(hostport); err == nil {
		host = h
	} else if strings.HasPrefix(host, "[") && strings.HasSuffix(host, "]") {
		host = host[1 : len(host)-1] // [::1] without a port
	}
	if host == "" {
		return false
	}
	if slices.Contains(allowed, strings.ToLower(host)) {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameOrigin reports whether a request may come from the page making it:
// no Origin (not a browser, or a same-origin GET), or an Origin whose host
// and port are the request's own Host; and no cross-site fetch metadata.
func sameOrigin(r *http.Request) bool {
	switch r.Header.Get("Sec-Fetch-Site") {
	case "cross-site", "same-site":
		return false
	}
	values := r.Header.Values("Origin")
	if len(values) == 0 {
		return true
	}
	if len(values) > 1 {
		return false
	}
	u, err := url.Parse(values[0])
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return false // "null" (a sandboxed frame, a file) included
	}
	return strings.EqualFold(u.Host, r.Host)
}

// isJSON reports whether a Content-Type is application/json (parameters
// such as charset allowed).
func isJSON(contentType string) bool {
	media, _, err := mime.ParseMediaType(contentType)
	return err == nil && media == "application/json"
}

// ValidHostName reports whether name may be an extra Host name
// (--api-allowed-host): a DNS name or an IP address, without a port.
func ValidHostName(name string) bool {
	if name == "" || len(name) > 253 {
		return false
	}
	if net.ParseIP(name) != nil {
		return true
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}
