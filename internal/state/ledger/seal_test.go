package ledger

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestHostKeyIsCreatedOnceAt0600(t *testing.T) {
	s := Store{Root: t.TempDir()}
	key, err := s.HostKey()
	require.NoError(t, err)
	require.Len(t, key, hostKeyBytes)
	info, err := os.Stat(filepath.Join(s.Root, hostKeyFile))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	again, err := s.HostKey()
	require.NoError(t, err)
	assert.Equal(t, key, again, "the key is kept, never redrawn")
}

func TestHostKeyRefusesALooseOrTornFile(t *testing.T) {
	s := Store{Root: t.TempDir()}
	_, err := s.HostKey()
	require.NoError(t, err)
	path := filepath.Join(s.Root, hostKeyFile)
	require.NoError(t, os.Chmod(path, 0o644))
	_, err = s.HostKey()
	assert.ErrorContains(t, err, "readable by others")
	require.NoError(t, os.Chmod(path, 0o600))
	require.NoError(t, os.WriteFile(path, []byte("short"), 0o600))
	_, err = s.HostKey()
	assert.ErrorContains(t, err, "holds 5 bytes")
}

func TestSealNeverHoldsThePlainTextAndOpensOnlyInItsContext(t *testing.T) {
	s := Store{Root: t.TempDir()}
	key, err := s.HostKey()
	require.NoError(t, err)
	secret := []byte("control-key-0123456789abcdef")
	sealed, err := Seal(key, secret, "attempt-a")
	require.NoError(t, err)
	assert.NotContains(t, sealed, string(secret))
	plain, err := Unseal(key, sealed, "attempt-a")
	require.NoError(t, err)
	assert.Equal(t, secret, plain)

	_, err = Unseal(key, sealed, "attempt-b")
	assert.ErrorContains(t, err, "does not open", "moved to another attempt")
	other := make([]byte, hostKeyBytes)
	_, err = Unseal(other, sealed, "attempt-a")
	assert.ErrorContains(t, err, "does not open", "another host's key")
	tampered := sealed[:len(sealed)-2] + "AA"
	if tampered == sealed {
		tampered = sealed[:len(sealed)-2] + "BB"
	}
	_, err = Unseal(key, tampered, "attempt-a")
	assert.Error(t, err)
	_, err = Unseal(key, "v0.abc", "attempt-a")
	assert.ErrorContains(t, err, "unknown version")
}
