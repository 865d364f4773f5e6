// Package bearer reads bearer-token files and guards HTTP handlers with
// their token: the daemon's TCP metrics listener and the console's one
// manage action.
package bearer

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"syscall"
)

// MinTokenLength is the shortest token accepted.
const MinTokenLength = 16

// ReadTokenFile reads a bearer token: a regular file owned
// by this process's user, with no access for group or others, holding at
// least MinTokenLength characters (surrounding white space is ignored).
func ReadTokenFile(path string) (string, error) {
	if path == "" {
		return "", errors.New("no token file named")
	}
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("token file %s: not a regular file", path)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s: mode %04o gives access to group or others; use 0600", path, info.Mode().Perm())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() {
		return "", fmt.Errorf("token file %s: owned by uid %d, not by forged's user", path, st.Uid)
	}
	raw, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		return "", fmt.Errorf("token file: %w", err)
	}
	token := strings.TrimSpace(string(raw))
	if len(token) < MinTokenLength || strings.ContainsAny(token, " \t\r\n") {
		return "", fmt.Errorf("token file %s: one token of at least %d characters expected", path, MinTokenLength)
	}
	return token, nil
}

// Require serves next only to requests that carry
// "Authorization: Bearer <token>"; others get 401 and nothing else.
func Require(token, realm string, next http.Handler) http.Handler {
	want := []byte("Bearer " + token)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", fmt.Sprintf("Bearer realm=%q", realm))
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}
