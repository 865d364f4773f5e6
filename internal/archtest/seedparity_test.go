package archtest

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

// seedVariables are the FORGE_SANDBOX_* variables the seed documents read
// (grep -oh 'FORGE_SANDBOX_[A-Z0-9_]*' over them), and the seed's other
// host settings docs/seed-parity.md maps. When the seed documents are at
// hand (FORGED_SEED_DIR, or ../shared/reference/seeds beside the
// checkout), the test also checks that this list misses none of them.
var seedVariables = []string{
	"FORGE_SANDBOX_BUILDER_MEMORY_BYTES", "FORGE_SANDBOX_BUILDER_PIDS_LIMIT", "FORGE_SANDBOX_BUILDKIT_CACHE_MAX",
	"FORGE_SANDBOX_BUILDKIT_CACHE_RESERVED", "FORGE_SANDBOX_BUILD_EGRESS_ENFORCED", "FORGE_SANDBOX_BUILD_NOFILE",
	"FORGE_SANDBOX_DEDICATED_DISK", "FORGE_SANDBOX_EGRESS_ENFORCED", "FORGE_SANDBOX_EGRESS_PROXY_IMAGE",
	"FORGE_SANDBOX_HARD_WALL_SECONDS", "FORGE_SANDBOX_IDLE_SECONDS", "FORGE_SANDBOX_IMAGE_POLICY_ENFORCED",
	"FORGE_SANDBOX_LSM_SECURITY_OPT", "FORGE_SANDBOX_PROVENANCE_SIGNING_KEY", "FORGE_SANDBOX_REQUIRE_ROOTLESS",
	"FORGE_SANDBOX_SBOM_EXECUTABLE", "FORGE_SANDBOX_SECCOMP_PROFILE", "FORGE_SANDBOX_SIGNATURE_EXECUTABLE",
	"FORGE_SANDBOX_SIGNATURE_PUBLIC_KEY", "FORGE_SANDBOX_VULNERABILITY_EXECUTABLE", "FORGE_SANDBOX_ID",
	"FORGE_MAX_CONCURRENT_SANDBOXES", "FORGE_ALLOW_DOCKER_DESKTOP_SANDBOX", "FORGE_ALLOW_OPEN_PUBLIC_SANDBOX",
}

var (
	seedVariable = regexp.MustCompile(`FORGE_SANDBOX_[A-Z0-9_]*[A-Z0-9]`)
	backticked   = regexp.MustCompile("`([^`]+)`")
)

// seedParityTables splits docs/seed-parity.md's two tables: the settings
// table's first cells and the behaviours table's rows.
func seedParityTables(t *testing.T) (variables []string, behaviours [][]string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "seed-parity.md"))
	require.NoError(t, err)
	table := ""
	for _, line := range strings.Split(string(data), "\n") {
		switch {
		case strings.HasPrefix(line, "| seed variable |"):
			table = "variables"
			continue
		case strings.HasPrefix(line, "| # |"):
			table = "behaviours"
			continue
		case !strings.HasPrefix(line, "|"):
			table = ""
			continue
		case strings.HasPrefix(line, "| ---"):
			continue
		}
		cells := strings.Split(strings.Trim(strings.TrimSpace(line), "|"), " | ")
		switch table {
		case "variables":
			for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
				variables = append(variables, m[1])
			}
		case "behaviours":
			behaviours = append(behaviours, cells)
		}
	}
	return variables, behaviours
}

// TestSeedParityMapsEverySeedVariable: every seed variable is in the
// settings table of docs/seed-parity.md.
func TestSeedParityMapsEverySeedVariable(t *testing.T) {
	mapped, _ := seedParityTables(t)
	for _, v := range seedVariables {
		assert.Contains(t, mapped, v, "docs/seed-parity.md maps no forged setting to the seed's %s", v)
	}
	for _, dir := range seedDirs(t) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range entries {
			data, err := os.ReadFile(filepath.Join(dir, e.Name()))
			require.NoError(t, err)
			for _, v := range seedVariable.FindAllString(string(data), -1) {
				assert.Contains(t, seedVariables, v, "the seed document %s reads %s: add it here and to docs/seed-parity.md", e.Name(), v)
			}
		}
	}
}

// seedDirs are where the seed documents may be, when they are at hand.
func seedDirs(t *testing.T) []string {
	root := moduleRoot(t)
	dirs := []string{filepath.Join(root, "..", "shared", "reference", "seeds"), filepath.Join(root, "..", "..", "shared", "reference", "seeds")}
	if d := os.Getenv("FORGED_SEED_DIR"); d != "" {
		dirs = append([]string{d}, dirs...)
	}
	return dirs
}

// TestSeedParityNamesOnlyRegisteredCodes: every code in the behaviours
// table's codes column is registered (an alias resolves to its wire
// name), every row has its six cells and a status, and the rows are
// numbered 1 to n.
func TestSeedParityNamesOnlyRegisteredCodes(t *testing.T) {
	_, rows := seedParityTables(t)
	require.NotEmpty(t, rows)
	statuses := []string{"same", "different", "partial", "issue 30 §1"}
	for i, cells := range rows {
		if !assert.Len(t, cells, 6, "row %d of the behaviours table: %v", i+1, cells) {
			continue
		}
		assert.Equal(t, strconv.Itoa(i+1), strings.TrimSpace(cells[0]), "the rows are numbered in order")
		status := strings.TrimSpace(cells[4])
		assert.True(t, slices.ContainsFunc(statuses, func(s string) bool { return strings.HasPrefix(status, s) }), "row %s: status %q is not one of %v", cells[0], status, statuses)
		if strings.HasPrefix(status, "partial") || strings.HasPrefix(status, "different") {
			assert.NotEqual(t, status, "partial", "row %s: a partial behaviour says why", cells[0])
			assert.NotEqual(t, status, "different", "row %s: a different behaviour says why", cells[0])
		}
		for _, m := range backticked.FindAllStringSubmatch(cells[5], -1) {
			_, ok := failure.Lookup(failure.Code(m[1]))
			assert.True(t, ok, "row %s names the code %s, which is not registered", cells[0], m[1])
		}
	}
}
