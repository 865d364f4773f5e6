package gitops

import (
	"strings"
	"testing"

	"github.com/forgedev/forged/failure"
)

func FuzzParseObjectInventory(f *testing.F) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 64)
	for _, seed := range []string{
		"", "\n", a + " blob 1\n", a + " commit 12\n" + a + " tree 3\n",
		b + " tag 99999999999999999999\n", a + " blob -1", a + "  tree 1\r\n", "\x00\xff",
	} {
		f.Add(seed, uint16(3), uint32(1000))
	}
	f.Fuzz(func(t *testing.T, in string, maxObjects uint16, maxBytes uint32) {
		budget := Budget{MaxObjects: int(maxObjects), MaxExpandedBytes: int64(maxBytes)}
		inv, err := ParseObjectInventory(in, budget)
		if err != nil {
			if !failure.Is(err, failure.SandboxOutputInvalid) {
				t.Fatalf("error without the output-invalid code: %v", err)
			}
			return
		}
		b := budget.withDefaults()
		if inv.Objects < 1 || inv.Objects > b.MaxObjects || inv.ExpandedBytes < 0 || inv.ExpandedBytes > b.MaxExpandedBytes {
			t.Fatalf("accepted inventory %+v outside budget %+v", inv, b)
		}
	})
}

func FuzzParseCommitDepth(f *testing.F) {
	for _, seed := range []string{"", "0", "12\n", " 7 ", "-1", "99999999999999999999999", "1e3", "٣"} {
		f.Add(seed, uint16(10))
	}
	f.Fuzz(func(t *testing.T, in string, maxDepth uint16) {
		budget := Budget{MaxCommitDepth: int(maxDepth)}
		depth, err := ParseCommitDepth(in, budget)
		if err != nil {
			if !failure.Is(err, failure.SandboxOutputInvalid) {
				t.Fatalf("error without the output-invalid code: %v", err)
			}
			return
		}
		if depth < 0 || depth > budget.withDefaults().MaxCommitDepth {
			t.Fatalf("accepted depth %d outside budget %d", depth, budget.withDefaults().MaxCommitDepth)
		}
	})
}
