package timelimit

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOperatorBounds(t *testing.T) {
	l, err := Operator(8*time.Hour, 10*time.Minute)
	require.NoError(t, err)
	assert.Equal(t, Default(), l)
	_, err = Operator(time.Minute, time.Minute)
	assert.NoError(t, err)
	for _, c := range []struct{ hard, idle time.Duration }{
		{59 * time.Second, time.Minute}, {8*time.Hour + time.Second, time.Minute},
		{time.Hour, 59 * time.Second}, {time.Hour, time.Hour + time.Second}, {time.Hour, 90500 * time.Millisecond},
	} {
		_, err := Operator(c.hard, c.idle)
		assert.Error(t, err, "hard wall %s, idle %s", c.hard, c.idle)
	}
}

func TestTaskTimeoutOnlyShortens(t *testing.T) {
	op := Limits{HardWall: 2 * time.Hour, Idle: 10 * time.Minute}
	assert.Equal(t, op, op.ForTask(0), "no task timeout: the operator's limits")
	assert.Equal(t, op, op.ForTask(3*3600), "a longer task timeout never lengthens the hard wall")
	assert.Equal(t, Limits{HardWall: time.Hour, Idle: 10 * time.Minute}, op.ForTask(3600))
	assert.Equal(t, Limits{HardWall: 30 * time.Second, Idle: 30 * time.Second}, op.ForTask(30), "idle never exceeds the hard wall")
	assert.Equal(t, Default(), Limits{}.ForTask(0))
}
