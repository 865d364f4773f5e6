package wordfreq

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"
)

func TestCount(t *testing.T) {
	got := Count("the cat and the hat; The end")
	want := map[string]int{"the": 3, "cat": 1, "and": 1, "hat": 1, "end": 1}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Count = %v, want %v", got, want)
	}
}

func TestTop(t *testing.T) {
	got := Top(map[string]int{"b": 2, "a": 2, "c": 5, "d": 1}, 3)
	want := []Entry{{"c", 5}, {"a", 2}, {"b", 2}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Top = %v, want %v", got, want)
	}
	if got := Top(map[string]int{"x": 1}, 10); len(got) != 1 {
		t.Fatalf("Top beyond the length = %v", got)
	}
}

// TestScratchDirectories checks the sandbox layout a Go toolchain relies
// on: t.TempDir (under TMPDIR) holds files that can be executed, and HOME
// and the build cache directory are writable.
func TestScratchDirectories(t *testing.T) {
	script := filepath.Join(t.TempDir(), "hello.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho executable-tmp\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(script).Output()
	if err != nil || string(out) != "executable-tmp\n" {
		t.Fatalf("run %s: %q, %v", script, out, err)
	}
	for _, env := range []string{"HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"} {
		dir := os.Getenv(env)
		if dir == "" {
			t.Fatalf("%s is not set", env)
		}
		f, err := os.CreateTemp(dir, "probe")
		if err != nil {
			t.Fatalf("%s=%s is not writable: %v", env, dir, err)
		}
		f.Close()
		os.Remove(f.Name())
	}
}

func ExampleTop() {
	for _, e := range Top(Count("to be or not to be"), 2) {
		fmt.Println(e.Word, e.Count)
	}
	// Output:
	// be 2
	// to 2
}
