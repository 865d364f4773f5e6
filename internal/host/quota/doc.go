// Package quota bounds the disk an attempt can fill on the host.
//
// An attempt's writable storage is its workspace volume (/workspace) and
// its control volume (/control: the input bundle and the output). The root
// filesystem is read-only and the tmpfs mounts live in memory, so these two
// volumes are all a task can grow, besides the per-attempt package caches
// its contract declares (package caches), which are provisioned here the
// same way, each of the operator's cache size. Plain local volumes live in Docker's
// root directory without a size, so one task could fill it for every other
// attempt and for dockerd itself.
//
// # Mechanisms
//
// Detect picks the best mechanism the host offers, and preflight reports
// it:
//
//   - MechanismImage (rootful engine, a process that may attach loop
//     devices, mkfs.ext4 and debugfs): each volume is a fixed-size ext4
//     filesystem image, a sparse file under STATE_ROOT/volumes, attached to
//     a loop device with the loop ioctls and handed to the engine's local
//     volume driver as {type: ext4, device: /dev/loopN, o: nodev,nosuid}.
//     The filesystem is made with e2fsprogs' mkfs.ext4, without a journal
//     and without reserved blocks, its root owned by the worker's uid
//     (10001) and, for the control volume, pre-populated (with debugfs)
//     with input/ and output/ owned by that uid (the engine's copy-up does
//     not run on a filesystem image it did not make). The lost+found
//     directory mkfs.ext4 makes (root's, 0700) is removed with debugfs
//     before the image is attached: a task's tools walk /workspace and must not meet
//     a directory they cannot read; the worker still ignores one. The kernel refuses writes past the image's size
//     (ENOSPC), so the host loses at most the image's size per volume.
//     No step needs a capability: mkfs.ext4 and debugfs write a file
//     forged owns, and the loop ioctls need only read-write access to
//     /dev/loop-control and /dev/loopN (root's, and on Debian the disk
//     group's). Detect tries an attach rather than assume who may.
//   - MechanismNone: nothing bounds the volumes; preflight says so and why.
//     Project quotas (XFS/ext4 prjquota on Docker's root directory) and a
//     host-side usage watchdog are the planned fallbacks; neither is built
//     yet.
//
// # Sizes and slack
//
// The workspace image is exactly the dispatch's workspaceBytes
// (DefaultWorkspaceBytes, 4 GiB, when absent; at most MaxWorkspaceBytes, 64 GiB). The control image is
// ControlBytes: the input bundle, plus the output budget (the workspace
// size, at most 600 MiB: the result bundle holds at most the workspace's
// new objects), plus 32 MiB of filesystem overhead. So an attempt lowers
// the host's free space by at most workspaceBytes + ControlBytes; the
// control image is the documented slack.
//
// # Exhaustion is a host fact
//
// Usage reads the volume's filesystem from the host: statfs of its mount
// point while the engine has it mounted (found in /proc/self/mountinfo by
// the loop device's number), otherwise the ext4 superblock of the image,
// which the kernel writes back at unmount. A volume with less than
// FullSlackBytes free blocks, or no free inode, is full. Nothing the task
// prints takes part in that verdict.
//
// # Reading the output
//
// CopyDirOut reads a directory of a volume's image with debugfs once the
// engine has unmounted it (the superblock's valid bit), for the collect
// step: no engine call and no mount. It declines, for the engine's copy to
// judge, anything but plain regular files within the bounds.
//
// # Release
//
// Release detaches every loop device backed by a volume's image (found by
// the backing file the kernel reports in /sys/block/loop*/loop/backing_file)
// and removes the image; both are idempotent. A loop device that is still
// mounted is marked to detach itself when the engine unmounts it. The
// Docker teardown of an attempt (and so the reaper's ledger path) ends
// with ReleaseAttempt, and Sweep runs at start-up and after every reaper
// round for the attempts that are not live, so a kill -9 at any point leaves nothing behind
// once the next forged has started: images are named after the attempt's
// volumes, so nothing needs to be recorded to find them again.
package quota
