// Package dockerops is forged's only door to the Docker Engine. It talks to
// the engine through its HTTP API (github.com/docker/docker/client), never
// the docker CLI, and provides the operations one sandbox attempt needs:
//
//   - naming and labelling an attempt's resources (NamesFor, Labels,
//     Ownership) so that they can later be found and removed by exact
//     identity;
//   - provisioning the attempt's volumes and, for attempts that need one,
//     an isolated network whose containers reach no address of the host
//     (CreateIsolatedNetwork, VerifyHostIsolation, ProbeNetworkIsolation;
//     the design is written down in network.go), and creating the hardened
//     worker container, with network none by default
//     (WorkerContainerConfig, CreateWorker) and the task's sandbox layout:
//     executable tmpfs mounts for TMPDIR (/tmp) and HOME (/home/forge)
//     sized from the memory limit (ScratchTmpfsBytes), and a noexec
//     /run/forge for forged's files;
//   - resolving the operator's seccomp and LSM options, refusing under
//     sandbox_required those that switch confinement off or that the
//     engine would not enforce (ResolveSecurityOptions);
//   - copying the input in and the output out (CopyFileInto, CopyDirOut),
//     the latter with a strict, bounded tar extractor;
//   - running the worker attached (RunAttached), with bounded stdout and
//     stderr capture, line streaming and stop-on-cancel;
//   - inspecting exit state and memory use, releasing a worker that waits
//     for the host's last reading (ReleaseWorker), and classifying resource
//     failures from trusted host facts (ClassifyHostFailure: the engine's
//     state, the kernel's counters, the host's statfs, the worker's report
//     where the host has none);
//   - label-driven teardown with a cleanup report (Teardown);
//   - building the project image and the agent overlay with the classic
//     builder (BuildImage, OverlayContext) and the image cache key.
//
// Every engine call runs under its own deadline (Options.Timeouts).
// Transient failures (connection errors, 503, per-call deadline, and 500 for
// read-only calls) are retried with bounded exponential backoff; permanent
// ones (not found, invalid parameter, conflict, forbidden, unauthorised...)
// are returned at once. Removal treats "not found" as success. Cleanup paths
// run on a context detached from the caller's cancellation.
//
// Failures that forged reports carry a failure.Code (see package failure);
// the wrapped Docker error stays reachable with errors.Is / errors.As.
//
// # The worker in the image
//
// The agent overlay bakes the worker binary (cmd/forged-worker, not the
// daemon) into the image at messages.WorkerBinaryPath, and the image key
// holds that binary's own sha256 (ImageKeyInputs.WorkerDigest). The worker
// is built reproducibly, so a daemon rebuilt or upgraded without touching
// the worker's code finds every image it built before.
//
// Injecting the worker at run time instead, read-only, would leave only the
// project's inputs in the key, but was not chosen: the engine may be remote
// (a Docker context), so a host bind mount is out, and the worker would
// have to reach each container another way: a volume filled through a
// helper container (one more object per attempt or a shared one with its
// own lifecycle, reaping and garbage collection), or a copy into the
// created container before it starts, which a read-only root filesystem
// refuses and which would land writable and worker-owned. The probe
// containers (which run the worker too) and containers adopted after a
// daemon restart (whose lease updates exec the worker) would need the same
// path. Baking keeps one mechanism, the one already confined and tested;
// the worker's digest changes only with the worker itself. (The one host
// path a worker mounts, WithSandboxEtc's /etc files, is mounted only when
// the bounded volume store's loop devices show the engine on this host.)
package dockerops
