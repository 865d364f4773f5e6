package dockerops

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/messages"
)

// TestIntegrationSandboxLayout checks, from inside a real worker container,
// the filesystem layout toolchains rely on, and tries to cross each bound:
// the scratch tmpfs mounts (/tmp and HOME) run what is built there and stop
// a writer at their size with ENOSPC, /run/forge never executes anything,
// and the root filesystem stays read-only.
func TestIntegrationSandboxLayout(t *testing.T) {
	const memory = 256 << 20
	scratchMiB := ScratchTmpfsBytes(memory) >> 20
	script := strings.Join([]string{
		`for d in /tmp /home/forge /run/forge; do`,
		`  printf '#!/bin/sh\necho ran\n' > $d/probe.sh && chmod 755 $d/probe.sh`,
		`  if out=$($d/probe.sh 2>/dev/null) && [ "$out" = ran ]; then echo "exec $d yes"; else echo "exec $d no"; fi`,
		`done`,
		`grep -E ' (/tmp|/home/forge|/run/forge) ' /proc/mounts | while read -r _ dir fs opts _; do echo "mount $dir $fs $opts"; done`,
		// Each scratch mount alone: fill it past its size, then empty it
		// (both full at once would reach the memory limit).
		`for d in /tmp /home/forge; do`,
		`  if dd if=/dev/zero of=$d/fill bs=1048576 count=` + fmt.Sprint(scratchMiB+64) + ` 2>/dev/null; then echo "fill $d completed"; else echo "fill $d stopped"; fi`,
		`  echo "filled $d $(( $(wc -c < $d/fill) / 1048576 ))"`,
		`  rm -f $d/fill`,
		`done`,
		`if touch /rootfs-probe 2>/dev/null; then echo "rootfs writable"; else echo "rootfs read-only"; fi`,
		`echo "home $(stat -c '%u:%g %a' /home/forge) tmp $(stat -c '%u:%g %a' /tmp)"`,
		`echo "env HOME=$HOME TMPDIR=$TMPDIR"`,
	}, "\n")
	s := provision(t, script, func(spec *WorkerSpec) { spec.Resources.WorkerMemoryLimitBytes = memory })
	lines, res, err := s.run(t, testCtx(t), "", RunLimits{})
	require.NoError(t, err)
	require.Equal(t, 0, res.ExitCode, res.Stderr)
	out := strings.Join(lines, "\n")

	assert.Contains(t, lines, "exec /tmp yes", out)
	assert.Contains(t, lines, "exec /home/forge yes", out)
	assert.Contains(t, lines, "exec /run/forge no", "forged's control files are never executable")
	for _, l := range lines {
		if strings.HasPrefix(l, "mount ") {
			f := strings.Fields(l)
			require.Len(t, f, 4, l)
			assert.Equal(t, "tmpfs", f[2], l)
			opts := "," + f[3] + ","
			assert.Contains(t, opts, ",nosuid,", l)
			assert.Contains(t, opts, ",nodev,", l)
			if f[1] == "/run/forge" {
				assert.Contains(t, opts, ",noexec,", l)
				assert.Contains(t, opts, ",size=32768k,", l)
			} else {
				assert.NotContains(t, opts, ",noexec,", l)
				assert.Contains(t, opts, fmt.Sprintf(",size=%dk,", scratchMiB<<10), l)
			}
		}
	}
	assert.Equal(t, 3, strings.Count(out, "mount "), out)
	for _, d := range []string{"/tmp", "/home/forge"} {
		assert.Contains(t, lines, "fill "+d+" stopped", "a writer past the size gets ENOSPC")
		// The probe script takes a page, so the writer stops a MiB short
		// (the division rounds down).
		assert.Contains(t, lines, fmt.Sprintf("filled %s %d", d, scratchMiB-1), "the tmpfs holds its size and no more")
	}
	assert.Contains(t, lines, "rootfs read-only")
	assert.Contains(t, lines, fmt.Sprintf("home %d:%d 700 tmp %d:%d 1777", messages.WorkerUID, messages.WorkerGID, messages.WorkerUID, messages.WorkerGID))
	assert.Contains(t, lines, "env HOME="+messages.HomeDir+" TMPDIR="+messages.TempDir)
}
