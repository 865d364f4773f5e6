package ledger

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func sampleAdoption() *Adoption {
	return &Adoption{
		WorkerProtocol:   1,
		ContainerID:      strings.Repeat("c", 64),
		Image:            "sha256:" + strings.Repeat("1", 64),
		InputCommitSHA:   strings.Repeat("a", 40),
		ContractDigest:   "sha256:" + strings.Repeat("2", 64),
		StateDigest:      "sha256:" + strings.Repeat("3", 64),
		SealedControlKey: "v1.sealed",
		WorkerCreatedAt:  time.Date(2030, 1, 2, 3, 0, 0, 0, time.UTC),
		PublicationMode:  "none",
		EventSeq:         7,
	}
}

// TestAdoptionRecordRoundTrips: the record a restarted forged reads is the
// one written, through the store's strict reader.
func TestAdoptionRecordRoundTrips(t *testing.T) {
	s := Store{Root: t.TempDir()}
	e := sampleEntry()
	e.Adoption = sampleAdoption()
	require.NoError(t, s.Write(e))
	got, err := s.Read(e.AttemptID)
	require.NoError(t, err)
	require.NotNil(t, got.Adoption)
	assert.Equal(t, *e.Adoption, *got.Adoption)
}

func TestAdoptionRecordIsValidated(t *testing.T) {
	cases := map[string]func(a *Adoption){
		"no protocol":          func(a *Adoption) { a.WorkerProtocol = 0 },
		"no container":         func(a *Adoption) { a.ContainerID = "" },
		"control characters":   func(a *Adoption) { a.Image = "img\n" },
		"a short input commit": func(a *Adoption) { a.InputCommitSHA = "abc" },
		"a bad state digest":   func(a *Adoption) { a.StateDigest = "md5:00" },
		"no sealed key":        func(a *Adoption) { a.SealedControlKey = "" },
		"negative renewals":    func(a *Adoption) { a.LeaseRenewals = -1 },
		"no creation time":     func(a *Adoption) { a.WorkerCreatedAt = time.Time{} },
		"no publication mode":  func(a *Adoption) { a.PublicationMode = "" },
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			e := sampleEntry()
			e.SchemaVersion = SchemaVersion
			e.Adoption = sampleAdoption()
			mutate(e.Adoption)
			err := e.Validate()
			require.Error(t, err)
			assert.Equal(t, failure.LedgerInvalid, failure.CodeOf(err))
		})
	}
}
