package worker

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

const limitsDoc = `Limit                     Soft Limit           Hard Limit           Units
Max cpu time              unlimited            unlimited            seconds
Max open files            4096                 4096                 files
Max processes             unlimited            unlimited            processes
`

func TestProcParsers(t *testing.T) {
	assert.Equal(t, 4096, parseOpenFilesLimit([]byte(limitsDoc)))
	assert.Equal(t, 0, parseOpenFilesLimit([]byte("Max open files            unlimited   unlimited files\n")))
	assert.Equal(t, 0, parseOpenFilesLimit(nil))
	assert.Equal(t, 4096, parseFDSize([]byte("Name:\tstressprog\nFDSize:\t4096\nGroups:\n")))
	assert.Equal(t, 0, parseFDSize([]byte("FDSize:\t-1\n")))
}

func FuzzParseOpenFilesLimit(f *testing.F) {
	f.Add([]byte(limitsDoc))
	f.Add([]byte("Max open files -5"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if n := parseOpenFilesLimit(raw); n < 0 {
			t.Fatalf("negative limit %d", n)
		}
	})
}

func FuzzParseFDSize(f *testing.F) {
	f.Add([]byte("FDSize:\t64\n"))
	f.Add([]byte("FDSize:99999999999999999999\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		if n := parseFDSize(raw); n < 0 {
			t.Fatalf("negative size %d", n)
		}
	})
}
