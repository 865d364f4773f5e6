package cgroups

import "golang.org/x/sys/unix"

func statFS(path string) (FSUsage, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return FSUsage{}, err
	}
	bs := uint64(st.Bsize)
	return FSUsage{Total: st.Blocks * bs, Free: st.Bavail * bs, Used: (st.Blocks - st.Bfree) * bs, Tmpfs: st.Type == unix.TMPFS_MAGIC}, nil
}
