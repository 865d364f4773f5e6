package cgroups

import (
	"strings"
	"testing"
)

func FuzzParseProcCgroup(f *testing.F) {
	f.Add([]byte(procCgroupV1("/docker/" + containerID)))
	f.Add([]byte("0::/system.slice/docker-x.scope\n"))
	f.Add([]byte("1:name=systemd:/\n::\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ms, err := ParseProcCgroup(raw)
		if err != nil {
			return
		}
		for _, m := range ms {
			if !strings.HasPrefix(m.Path, "/") || m.ID < 0 {
				t.Fatalf("accepted %+v", m)
			}
		}
	})
}

func FuzzParseMountinfo(f *testing.F) {
	f.Add([]byte(mountinfoV1))
	f.Add([]byte(mountinfoV2))
	f.Add([]byte(`1 2 3:4 /a\0 /b\040c rw - cgroup cgroup rw,name=x,memory`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		ms, err := ParseMountinfo(raw)
		if err != nil {
			return
		}
		for _, m := range ms {
			if m.Version != V1 && m.Version != V2 {
				t.Fatalf("accepted %+v", m)
			}
		}
	})
}

func FuzzParseFlatKeyed(f *testing.F) {
	f.Add([]byte("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n"))
	f.Add([]byte("max 18446744073709551615\n"))
	f.Add([]byte("usage_usec max\r\n\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, err := ParseFlatKeyed(raw)
		if err != nil {
			return
		}
		for k := range m {
			if k == "" || len(k) > maxKeyBytes {
				t.Fatalf("accepted key %q", k)
			}
		}
	})
}

func FuzzParseValue(f *testing.F) {
	f.Add([]byte("220200960\n"))
	f.Add([]byte("max"))
	f.Add([]byte(" -1 "))
	f.Fuzz(func(t *testing.T, raw []byte) {
		_, _ = ParseValue(raw)
	})
}

func FuzzNamesContainer(f *testing.F) {
	f.Add("/docker/"+containerID, containerID)
	f.Add("/system.slice/docker-"+containerID+".scope", containerID)
	f.Fuzz(func(t *testing.T, p, id string) {
		if NamesContainer(p, id) && (id == "" || !strings.Contains(p, id)) {
			t.Fatalf("%q names %q", p, id)
		}
	})
}
