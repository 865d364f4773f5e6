package ledger

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/atomicfile"
)

// hostKeyFile is the host key's file in the state root: 32 random bytes,
// mode 0600, created whole (atomicfile.Create) on first use and never
// rewritten. It seals what a ledger must hold but never in plain text (an
// attempt's control key): a ledger copied off the host is useless without
// it.
const hostKeyFile = "host-key"

const hostKeyBytes = 32

// sealPrefix marks a sealed value's version: "v1." then the base64url
// (unpadded) of the 12-byte nonce and the AES-256-GCM ciphertext.
const sealPrefix = "v1."

// HostKey returns the host key of the state root, creating it on first
// use. A key file that is not a regular file of exactly 32 bytes, or that
// others may read, is refused (CodeStateIO): the key is never replaced
// silently, since that would orphan every sealed value.
func (s Store) HostKey() ([]byte, error) {
	if err := ensureDir(s.Root); err != nil {
		return nil, err
	}
	path := filepath.Join(s.Root, hostKeyFile)
	key, err := readHostKey(path)
	if !errors.Is(err, fs.ErrNotExist) {
		return key, err
	}
	fresh := make([]byte, hostKeyBytes)
	if _, err := rand.Read(fresh); err != nil {
		return nil, ioError(err, "draw the host key")
	}
	err = atomicfile.Create(path, fresh, fileMode)
	if errors.Is(err, fs.ErrExist) {
		return readHostKey(path) // created concurrently
	}
	if err != nil {
		return nil, ioError(err, "create %s", path)
	}
	return fresh, nil
}

func readHostKey(path string) ([]byte, error) {
	info, err := os.Lstat(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		return nil, ioError(err, "inspect %s", path)
	}
	if info.Mode().Perm()&0o077 != 0 {
		return nil, failure.New(CodeStateIO, "the host key %s is readable by others (mode %o); restrict it to 0600", path, info.Mode().Perm())
	}
	key, err := readBounded(path, hostKeyBytes)
	if err != nil {
		return nil, ioError(err, "read %s", path)
	}
	if len(key) != hostKeyBytes {
		return nil, failure.New(CodeStateIO, "the host key %s holds %d bytes, not %d", path, len(key), hostKeyBytes)
	}
	return key, nil
}

// Seal encrypts plaintext under key (AES-256-GCM, a random nonce), bound
// to context (the attempt id): a sealed value moved to another attempt's
// ledger does not open.
func Seal(key, plaintext []byte, context string) (string, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	sealed := aead.Seal(nonce, nonce, plaintext, []byte(context))
	return sealPrefix + base64.RawURLEncoding.EncodeToString(sealed), nil
}

// Unseal opens a value Seal made under key for context, or reports
// CodeLedgerInvalid.
func Unseal(key []byte, sealed, context string) ([]byte, error) {
	aead, err := newAEAD(key)
	if err != nil {
		return nil, err
	}
	if len(sealed) < len(sealPrefix) || sealed[:len(sealPrefix)] != sealPrefix {
		return nil, invalid("a sealed value has an unknown version")
	}
	raw, err := base64.RawURLEncoding.DecodeString(sealed[len(sealPrefix):])
	if err != nil || len(raw) < aead.NonceSize()+aead.Overhead() {
		return nil, invalid("a sealed value is malformed")
	}
	plain, err := aead.Open(nil, raw[:aead.NonceSize()], raw[aead.NonceSize():], []byte(context))
	if err != nil {
		return nil, invalid("a sealed value does not open under this state root's host key")
	}
	return plain, nil
}

func newAEAD(key []byte) (cipher.AEAD, error) {
	if len(key) != hostKeyBytes {
		return nil, invalid("the sealing key has %d bytes, not %d", len(key), hostKeyBytes)
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, invalid("sealing key: %v", err)
	}
	return cipher.NewGCM(block)
}
