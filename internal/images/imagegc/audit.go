package imagegc

import (
	"cmp"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"time"
)

// Audit artifacts are the restricted files forged keeps per image cache
// key under the state root, in the seed's two directories: the stored
// build logs (package buildlog, STATE_ROOT/build-logs/<key>/) and the
// image policy's attestations (STATE_ROOT/attestations/<key>/: SBOM,
// provenance). Each directory is collected apart, by the same rule.
// Acknowledged cleanup reports need no collection: acknowledging one
// removes it.
const (
	auditDir       = "build-logs"
	attestationDir = "attestations"
)

// auditDirs are the audit directories, in collection order.
var auditDirs = []string{auditDir, attestationDir}

// Bounds of audit retention, as the seed's: at least one key is kept, and
// nothing younger than an hour is removed for its age.
const (
	DefaultAuditKeep   = 64
	DefaultAuditMaxAge = 7 * 24 * time.Hour
	MinAuditMaxAge     = time.Hour
)

// auditKey is a cache key: 64 lowercase hex digits.
var auditKey = regexp.MustCompile(`^[0-9a-f]{64}$`)

// AuditRecord is one key's audit directory.
type AuditRecord struct {
	Key      string    `json:"key"`
	Modified time.Time `json:"modified"`
	// Dir is the audit directory ("build-logs", "attestations"); empty
	// means build-logs.
	Dir string `json:"dir,omitempty"`
}

// AuditReport is what one collection did with the audit artifacts.
type AuditReport struct {
	Removed []AuditRecord `json:"removed"` // with DryRun: what would be removed
	Kept    int           `json:"kept"`
	Failed  []string      `json:"failed"`
}

// SelectAudit returns the keys whose audit artifacts go, by the seed's
// rule (selectAuditArtifactGcCandidates): a protected key (in use by an
// attempt) stays; of the others, newest first, the first keep stay unless
// older than maxAge, and every one beyond them goes.
func SelectAudit(records []AuditRecord, keep int, maxAge time.Duration, protected map[string]bool, now time.Time) []AuditRecord {
	keep = max(keep, 1)
	maxAge = max(maxAge, MinAuditMaxAge)
	candidates := slices.DeleteFunc(slices.Clone(records), func(r AuditRecord) bool { return protected[r.Key] })
	slices.SortStableFunc(candidates, func(a, b AuditRecord) int { return cmp.Compare(b.Modified.UnixNano(), a.Modified.UnixNano()) })
	var out []AuditRecord
	for i, r := range candidates {
		if i >= keep || now.Sub(r.Modified) > maxAge {
			out = append(out, r)
		}
	}
	return out
}

// ListAudit lists the build-log directories under stateRoot. Anything
// that is not a real directory named by a cache key (a symbolic link, a
// file, a stray name) is ignored, never followed.
func ListAudit(stateRoot string) ([]AuditRecord, error) { return listAuditDir(stateRoot, auditDir) }

// listAuditDir lists one audit directory's keys, as ListAudit.
func listAuditDir(stateRoot, dir string) ([]AuditRecord, error) {
	root := filepath.Join(stateRoot, dir)
	entries, err := os.ReadDir(root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var records []AuditRecord
	for _, e := range entries {
		if !auditKey.MatchString(e.Name()) {
			continue
		}
		info, err := os.Lstat(filepath.Join(root, e.Name()))
		if err != nil || !info.IsDir() {
			continue // gone meanwhile, or not a plain directory
		}
		records = append(records, AuditRecord{Key: e.Name(), Modified: info.ModTime().UTC(), Dir: dir})
	}
	return records, nil
}

// PurgeAudit collects the audit artifacts under stateRoot (build logs and
// attestations, each directory apart) by SelectAudit, protecting the keys
// in use (req.InUse and req.Refs). With req.DryRun it only reports. The
// reaper calls it every round, the image collector every collection.
func PurgeAudit(stateRoot string, req Request) (AuditReport, error) {
	report := AuditReport{Removed: []AuditRecord{}, Failed: []string{}}
	protected := map[string]bool{}
	for k := range req.InUse {
		protected[k] = true
	}
	if req.Refs != nil {
		for k := range req.Refs.InUse() {
			protected[k] = true
		}
	}
	policy := req.Policy.withDefaults()
	var errs []error
	for _, dir := range auditDirs {
		records, err := listAuditDir(stateRoot, dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		gone := SelectAudit(records, policy.AuditKeep, policy.AuditMaxAge, protected, req.Now)
		report.Kept += len(records) - len(gone)
		for _, r := range gone {
			if !req.DryRun {
				if err := os.RemoveAll(filepath.Join(stateRoot, dir, r.Key)); err != nil {
					report.Failed = append(report.Failed, dir+"/"+r.Key+": "+err.Error())
					continue
				}
			}
			report.Removed = append(report.Removed, r)
		}
	}
	return report, errors.Join(errs...)
}
