package ledger

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

func TestTransitionTable(t *testing.T) {
	states := []State{Starting, Active, Releasing, Released, Degraded}
	allowed := map[[2]State]bool{
		{Starting, Starting}: true, {Starting, Active}: true, {Starting, Releasing}: true, {Starting, Degraded}: true,
		{Active, Active}: true, {Active, Releasing}: true, {Active, Degraded}: true,
		{Releasing, Releasing}: true, {Releasing, Released}: true, {Releasing, Degraded}: true,
		{Degraded, Degraded}: true, {Degraded, Releasing}: true,
	}
	for _, from := range states {
		for _, to := range states {
			want := allowed[[2]State{from, to}]
			e := sampleEntry()
			e.State = from
			next, err := e.Transition(to)
			if want {
				require.NoError(t, err, "%s → %s", from, to)
				require.Equal(t, to, next.State)
			} else {
				require.Error(t, err, "%s → %s", from, to)
				require.True(t, failure.Is(err, CodeLeaseTransition))
				require.Equal(t, from, next.State)
			}
			require.Equal(t, from, e.State, "Transition must not change its receiver")
		}
	}
}

func TestTransitionUnknownStates(t *testing.T) {
	e := sampleEntry()
	_, err := e.Transition("paused")
	require.True(t, failure.Is(err, CodeLeaseTransition))
	e.State = "paused"
	_, err = e.Transition(Degraded)
	require.True(t, failure.Is(err, CodeLeaseTransition))
	require.False(t, State("").Known())
}
