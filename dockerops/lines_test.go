package dockerops

import (
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLineWriterSplitsAcrossWrites(t *testing.T) {
	var lines []string
	w := &lineWriter{onLine: func(l []byte) error { lines = append(lines, string(l)); return nil }, maxLine: 10, maxTotal: 100}
	for _, chunk := range []string{"ab", "c\nde", "f\r\n\n", "g\nh", "ij"} {
		n, err := w.Write([]byte(chunk))
		require.NoError(t, err)
		assert.Equal(t, len(chunk), n)
	}
	require.NoError(t, w.flush())
	assert.Equal(t, []string{"abc", "def", "", "g", "hij"}, lines)
}

func TestLineWriterHandsOutCopies(t *testing.T) {
	var kept [][]byte
	w := &lineWriter{onLine: func(l []byte) error { kept = append(kept, l); return nil }, maxLine: 10, maxTotal: 100}
	_, err := w.Write([]byte("one\ntwo\n"))
	require.NoError(t, err)
	_, err = w.Write([]byte("par"))
	require.NoError(t, err)
	_, err = w.Write([]byte("tial\n"))
	require.NoError(t, err)
	assert.Equal(t, []string{"one", "two", "partial"}, []string{string(kept[0]), string(kept[1]), string(kept[2])})
}

func TestLineWriterBounds(t *testing.T) {
	noop := func([]byte) error { return nil }
	var limit *outputLimitError

	w := &lineWriter{onLine: noop, maxLine: 4, maxTotal: 100}
	_, err := w.Write([]byte("abcd\nabcde\n"))
	require.ErrorAs(t, err, &limit)
	assert.Contains(t, err.Error(), "line exceeded 4 bytes")

	w = &lineWriter{onLine: noop, maxLine: 4, maxTotal: 100}
	_, err = w.Write([]byte("abc"))
	require.NoError(t, err)
	_, err = w.Write([]byte("de"))
	require.ErrorAs(t, err, &limit, "an unterminated line is bounded too")

	w = &lineWriter{onLine: noop, maxLine: 100, maxTotal: 10}
	_, err = w.Write([]byte("12345\n"))
	require.NoError(t, err)
	_, err = w.Write([]byte("67890\n"))
	require.ErrorAs(t, err, &limit)
	assert.Contains(t, err.Error(), "10 byte capture budget")
}

func TestLineWriterCallbackError(t *testing.T) {
	boom := errors.New("boom")
	w := &lineWriter{onLine: func([]byte) error { return boom }, maxLine: 10, maxTotal: 100}
	_, err := w.Write([]byte("x\n"))
	var cb *callbackError
	require.ErrorAs(t, err, &cb)
	assert.ErrorIs(t, err, boom)
}

// The tail never starts inside a rune: "€" is three bytes, of which the
// last five bytes hold only two.
func TestTailWriterKeepsWholeRunes(t *testing.T) {
	w := &tailWriter{keep: 5, maxTotal: 100}
	for _, s := range []string{"ab€", "xyz"} {
		_, err := w.Write([]byte(s))
		require.NoError(t, err)
	}
	assert.Equal(t, "xyz", w.String())
	_, err := w.Write([]byte("€"))
	require.NoError(t, err)
	assert.Equal(t, "yz€", w.String())
	_, err = w.Write([]byte("1€€"))
	require.NoError(t, err)
	assert.Equal(t, "€", w.String())
	assert.True(t, utf8.ValidString(w.String()))
}

func TestTailWriter(t *testing.T) {
	w := &tailWriter{keep: 5, maxTotal: 20}
	for _, s := range []string{"ab", "cd", "efg"} {
		_, err := w.Write([]byte(s))
		require.NoError(t, err)
	}
	assert.Equal(t, "cdefg", w.String())
	_, err := w.Write([]byte("0123456789"))
	require.NoError(t, err)
	assert.Equal(t, "56789", w.String())
	_, err = w.Write([]byte(strings.Repeat("x", 6)))
	var limit *outputLimitError
	require.ErrorAs(t, err, &limit)
}
