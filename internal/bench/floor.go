package bench

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	"github.com/docker/docker/client"
	"github.com/docker/docker/pkg/stdcopy"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// floorAttempt is the engine's floor for one attempt: the least work of
// the same Engine API calls on one connection, independent steps in
// parallel, and nothing else (no ledger, no git, no sampling, no retries,
// no label checks):
//
//  1. network create (the seed's internal network, when withNetwork) and
//     the three volume creates, in parallel
//  2. container create (forged's worker configuration), then the copy of
//     the input bundle into it
//  3. attach, wait (next exit), start; the start packet to stdin; stdout
//     read to its end
//  4. inspect of the state and the copy of /control/output, in parallel
//  5. container remove (forced), then the network and volume removes, in
//     parallel
//
// The seed's root init container is not needed: the agent image carries
// the control directories owned by the worker, and the engine's copy-up
// on first mount gives the volumes that owner.
//
// Without the network the worker runs with network none, as forged's does:
// that is the floor of forged's own calls.
func floorAttempt(ctx context.Context, engine *client.Client, imageID string, a *sandboxAttempt, withNetwork bool) (err error) {
	n := a.names
	spec := a.workerSpec(imageID)
	if !withNetwork {
		spec.Network = ""
	}
	var containerID string
	defer func() {
		err = errors.Join(err, floorRemove(context.WithoutCancel(ctx), engine, a, containerID))
	}()
	if err := parallel(
		func() error {
			if !withNetwork {
				return nil
			}
			_, err := engine.NetworkCreate(ctx, n.Network, network.CreateOptions{Internal: true, Labels: a.labels})
			return err
		},
		func() error {
			_, err := engine.VolumeCreate(ctx, volume.CreateOptions{Name: n.WorkspaceVolume, Labels: a.labels})
			return err
		},
		func() error {
			_, err := engine.VolumeCreate(ctx, volume.CreateOptions{Name: n.ControlVolume, Labels: a.labels})
			return err
		},
		func() error {
			_, err := engine.VolumeCreate(ctx, volume.CreateOptions{Name: n.SecretsVolume, Labels: a.labels})
			return err
		},
	); err != nil {
		return err
	}
	cfg, host, net := dockerops.WorkerContainerConfig(spec)
	resp, err := engine.ContainerCreate(ctx, cfg, host, net, nil, n.Container)
	if err != nil {
		return fmt.Errorf("container create: %w", err)
	}
	containerID = resp.ID
	bundle, err := bundleTar(a.bundle)
	if err != nil {
		return err
	}
	if err := engine.CopyToContainer(ctx, containerID, path.Dir(messages.InputBundlePath), bundle, container.CopyToContainerOptions{}); err != nil {
		return fmt.Errorf("copy bundle: %w", err)
	}
	hijack, err := engine.ContainerAttach(ctx, containerID, container.AttachOptions{Stream: true, Stdin: true, Stdout: true, Stderr: true})
	if err != nil {
		return fmt.Errorf("attach: %w", err)
	}
	defer hijack.Close()
	waitC, waitErr := engine.ContainerWait(ctx, containerID, container.WaitConditionNextExit)
	if err := engine.ContainerStart(ctx, containerID, container.StartOptions{}); err != nil {
		return fmt.Errorf("start: %w", err)
	}
	go func() {
		_, _ = hijack.Conn.Write(a.packet)
		_ = hijack.CloseWrite()
	}()
	var stderr bytes.Buffer
	if _, err := stdcopy.StdCopy(io.Discard, &stderr, hijack.Reader); err != nil {
		return fmt.Errorf("stream: %w", err)
	}
	select {
	case res := <-waitC:
		if res.StatusCode != 0 {
			return fmt.Errorf("worker exited %d: %s", res.StatusCode, text.EllipsisTail(stderr.String(), 500))
		}
	case err := <-waitErr:
		return fmt.Errorf("wait: %w", err)
	}
	return parallel(
		func() error {
			_, err := engine.ContainerInspect(ctx, containerID)
			return err
		},
		func() error {
			rc, _, err := engine.CopyFromContainer(ctx, containerID, messages.OutputDir)
			if err != nil {
				return fmt.Errorf("copy output: %w", err)
			}
			defer rc.Close()
			return untarFlat(rc, a.outDir)
		},
	)
}

// floorRemove removes the container, then the network and volumes in
// parallel. NotFound is success.
func floorRemove(ctx context.Context, engine *client.Client, a *sandboxAttempt, containerID string) error {
	n := a.names
	if containerID == "" {
		containerID = n.Container
	}
	if err := engine.ContainerRemove(ctx, containerID, container.RemoveOptions{Force: true}); err != nil && !client.IsErrNotFound(err) {
		return err
	}
	ignoreMissing := func(err error) error {
		if client.IsErrNotFound(err) {
			return nil
		}
		return err
	}
	return parallel(
		func() error { return ignoreMissing(engine.NetworkRemove(ctx, n.Network)) },
		func() error { return ignoreMissing(engine.VolumeRemove(ctx, n.WorkspaceVolume, true)) },
		func() error { return ignoreMissing(engine.VolumeRemove(ctx, n.ControlVolume, true)) },
		func() error { return ignoreMissing(engine.VolumeRemove(ctx, n.SecretsVolume, true)) },
	)
}

// parallel runs fns at once and joins their errors.
func parallel(fns ...func() error) error {
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		go func() { defer wg.Done(); errs[i] = fn() }()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// bundleTar is a tar holding the bundle as repo.bundle, owned by the
// worker and readable by it only, as forged copies it.
func bundleTar(bundlePath string) (io.Reader, error) {
	data, err := os.ReadFile(bundlePath)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: path.Base(messages.InputBundlePath), Mode: 0o400, Size: int64(len(data)),
		Uid: messages.WorkerUID, Gid: messages.WorkerGID}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	return &buf, tw.Close()
}

// untarFlat writes the regular files of the top directory of a
// CopyFromContainer tar into dir (only what the benchmark checks: the
// manifest's presence).
func untarFlat(r io.Reader, dir string) error {
	tr := tar.NewReader(r)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		parts := strings.Split(strings.Trim(hdr.Name, "/"), "/")
		if hdr.Typeflag != tar.TypeReg || len(parts) != 2 {
			continue
		}
		f, err := os.OpenFile(filepath.Join(dir, parts[1]), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		_, err = io.Copy(f, io.LimitReader(tr, 64<<20))
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
}
