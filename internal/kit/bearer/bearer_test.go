package bearer

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestReadTokenFileRules(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string, mode os.FileMode) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(content), 0o600))
		require.NoError(t, os.Chmod(p, mode))
		return p
	}
	token, err := ReadTokenFile(write("ok", "  0123456789abcdef\n", 0o600))
	require.NoError(t, err)
	assert.Equal(t, "0123456789abcdef", token)
	_, err = ReadTokenFile(write("open", "0123456789abcdef", 0o640))
	assert.ErrorContains(t, err, "group or others")
	_, err = ReadTokenFile(write("short", "short", 0o600))
	assert.ErrorContains(t, err, "at least")
	_, err = ReadTokenFile(write("two", "0123456789abcdef 0123456789abcdef", 0o600))
	assert.Error(t, err)
	_, err = ReadTokenFile("")
	assert.Error(t, err)
	_, err = ReadTokenFile(dir)
	assert.Error(t, err)
}

func TestRequireAnswers401WithoutTheToken(t *testing.T) {
	h := Require("0123456789abcdef", "test", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusTeapot) }))
	for auth, want := range map[string]int{"": 401, "Bearer x": 401, "Bearer 0123456789abcdef": http.StatusTeapot, "bearer 0123456789abcdef": 401} {
		req := httptest.NewRequest(http.MethodGet, "/", nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		assert.Equal(t, want, rec.Code, auth)
		if want == 401 {
			assert.Equal(t, `Bearer realm="test"`, rec.Header().Get("WWW-Authenticate"))
		}
	}
}
