package imagepolicy

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"

	"github.com/forgedev/forged/internal/kit/atomicfile"
	"github.com/forgedev/forged/internal/kit/strictjson"
)

// RecordSchema is the record's schema version.
const RecordSchema = 1

// maxRecordBytes bounds a record read back from disk.
const maxRecordBytes = 64 << 10

// Record is the image policy's record of one image key: what was
// evaluated, against which policy, with which verdict.
type Record struct {
	Schema int    `json:"schemaVersion"`
	Key    string `json:"key"`
	// ImageID is the agent image the record is about.
	ImageID string `json:"imageId"`
	// PolicyDigest is the policy's own digest (Policy.Digest).
	PolicyDigest string `json:"policyDigest"`
	// Status is "passed" or "warning" (incomplete attestations, or a scan
	// that warned).
	Status string `json:"status"`
	// Verdict is the scan's ("" when no scan command is configured).
	Verdict Verdict `json:"verdict,omitempty"`
	// Missing names the parts not configured (sbom, scan, provenance).
	Missing []string `json:"missing,omitempty"`
	// Evaluation is the scan's detail.
	Evaluation *Evaluation `json:"evaluation,omitempty"`
	// SBOMPath and SBOMDigest name the stored CycloneDX SBOM.
	SBOMPath   string `json:"sbomPath,omitempty"`
	SBOMDigest string `json:"sbomDigest,omitempty"`
	// ProvenancePath and ProvenanceDigest name the stored DSSE envelope.
	ProvenancePath   string `json:"provenancePath,omitempty"`
	ProvenanceDigest string `json:"provenanceDigest,omitempty"`
	// AttemptID is the attempt whose build produced the record.
	AttemptID string `json:"attemptId"`
}

// Statuses of a record, and the seed's event names for them.
const (
	StatusPassed  = "passed"
	StatusWarning = "warning"
)

var keyPattern = regexp.MustCompile(`^[0-9a-f]{64}$`)

// RecordPath is where the record of key lives under the state root.
func RecordPath(stateRoot, key string) string {
	return filepath.Join(stateRoot, "image-policy", key+".json")
}

// SaveRecord writes r atomically, mode 0600 in a directory of mode 0700.
func SaveRecord(stateRoot string, r Record) error {
	if !keyPattern.MatchString(r.Key) {
		return fmt.Errorf("image policy record: unsafe key %q", clip(r.Key, 80))
	}
	r.Schema = RecordSchema
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	path := RecordPath(stateRoot, r.Key)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return fmt.Errorf("image policy record: %w", err)
	}
	return atomicfile.Write(path, append(data, '\n'), 0o600)
}

// ErrNoRecord is LoadRecord's answer when key has no record.
var ErrNoRecord = errors.New("no image policy record")

// LoadRecord reads the record of key: bounded, strictly decoded, never
// through a symbolic link.
func LoadRecord(stateRoot, key string) (Record, error) {
	if !keyPattern.MatchString(key) {
		return Record{}, fmt.Errorf("image policy record: unsafe key %q", clip(key, 80))
	}
	data, err := readRegular(RecordPath(stateRoot, key), maxRecordBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, ErrNoRecord
	}
	if err != nil {
		return Record{}, fmt.Errorf("image policy record: %w", err)
	}
	return decodeRecord(data, key)
}

// decodeRecord decodes a record of key strictly.
func decodeRecord(data []byte, key string) (Record, error) {
	var r Record
	if err := strictjson.Decode(data, &r); err != nil {
		return Record{}, fmt.Errorf("image policy record: %w", err)
	}
	if r.Schema != RecordSchema || r.Key != key {
		return Record{}, fmt.Errorf("image policy record: schema %d or key %q does not match", r.Schema, clip(r.Key, 80))
	}
	return r, nil
}

// RemoveRecord removes the record of key; no record is success.
func RemoveRecord(stateRoot, key string) error {
	if !keyPattern.MatchString(key) {
		return nil
	}
	err := os.Remove(RecordPath(stateRoot, key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// readRegular reads a regular file (not a symbolic link) of at most max
// bytes.
func readRegular(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > max {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, max)
	}
	return data, nil
}

// fileDigest is "sha256:<hex>" of a regular file's content.
func fileDigest(path string) (string, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	if !info.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// DigestBytes is "sha256:<hex>" of data.
func DigestBytes(data []byte) string {
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:])
}
