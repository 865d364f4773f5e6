package strictjson

import (
	"errors"
	"testing"
)

func TestDecode(t *testing.T) {
	var v struct {
		A int `json:"a"`
	}
	if err := Decode([]byte(` {"a": 1} `), &v); err != nil || v.A != 1 {
		t.Fatalf("valid document: %v %+v", err, v)
	}
	if err := Decode([]byte(`{"a":1,"b":2}`), &v); err == nil {
		t.Fatal("unknown field accepted")
	}
	if err := Decode([]byte(`{"a":1}{}`), &v); !errors.Is(err, ErrTrailingData) {
		t.Fatalf("trailing data: %v", err)
	}
	if err := Decode([]byte(`{"a":`), &v); err == nil {
		t.Fatal("truncated document accepted")
	}
}
