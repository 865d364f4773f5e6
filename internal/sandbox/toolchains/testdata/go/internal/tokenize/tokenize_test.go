package tokenize

import (
	"reflect"
	"testing"
)

func TestWords(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello, world!", []string{"hello", "world"}},
		{"don't  STOP\tme-now", []string{"don't", "stop", "me", "now"}},
		{"Ünïcode 42", []string{"ünïcode", "42"}},
	} {
		if got := Words(tc.in); !reflect.DeepEqual(got, tc.want) && !(len(got) == 0 && len(tc.want) == 0) {
			t.Errorf("Words(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
