package dockerops

import (
	"context"
	"fmt"
	"github.com/forgedev/forged/internal/kit/ids"
	"math"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
	"github.com/forgedev/forged/messages"
)

// teardownAPI is the part of the engine API that finds and removes an
// attempt's objects.
type teardownAPI interface {
	ContainerList(ctx context.Context, options container.ListOptions) ([]container.Summary, error)
	ContainerStop(ctx context.Context, container string, options container.StopOptions) error
	ContainerRemove(ctx context.Context, container string, options container.RemoveOptions) error
	NetworkList(ctx context.Context, options network.ListOptions) ([]network.Summary, error)
	NetworkRemove(ctx context.Context, network string) error
	VolumeList(ctx context.Context, options volume.ListOptions) (volume.ListResponse, error)
	VolumeRemove(ctx context.Context, volumeID string, force bool) error
}

// Resource types and outcomes of cleanup actions.
const (
	ResourceContainer = "container"
	ResourceNetwork   = "network"
	ResourceVolume    = "volume"
	// ResourceVolumeImage is a filesystem image (and its loop device)
	// behind a volume; its id is the image's path.
	ResourceVolumeImage = "volume_image"

	OutcomeRemoved = "removed"
	OutcomeFailed  = "failed"
)

// Messages of resources found after teardown.
const (
	msgRemained       = "exact-labelled resource remained after teardown"
	msgForeignRemains = "resource labelled with this attempt but another owner was left in place"
)

// CleanupAction is one removal in a teardown report.
type CleanupAction = messages.CleanupAction

// CleanupReport is the account of one teardown. Remaining counts the
// objects still labelled with the attempt afterwards; RemainingUnknown says
// the engine could not be listed, so that count is not known.
type CleanupReport = messages.CleanupReport

// labelled is one engine object found by label.
type labelled struct {
	kind, id, name string
	labels         map[string]string
	created        time.Time // zero when the engine did not say
	// stopped is a container the list reported created, exited or dead:
	// nothing runs in it to be given a grace, so it is removed at once.
	stopped bool
}

// Teardown removes every container, network and volume labelled with the
// owner's attempt whose labels match owner exactly: containers first
// (stopped with Options.StopGrace, then force-removed keeping volumes),
// then networks, then volumes. "Not found" counts as removed. It then
// lists again: anything still labelled with the attempt (including objects
// of another owner, which are never touched) is reported as failed. The
// error (failure.SandboxTeardownFailed) is returned with the report when
// anything failed or remains. Tearing down nothing succeeds with no
// actions.
//
// Teardown runs on a context detached from ctx's cancellation and bounded
// by Options.TeardownTimeout, each engine call under its own deadline, so
// that an attempt cancelled by its caller is still cleaned up. source is
// recorded in the report ("teardown" or "reaper").
func (c *Client) Teardown(ctx context.Context, owner Ownership, source string) (CleanupReport, error) {
	report := CleanupReport{ReportID: ids.NewUUID(), Source: source, Actions: []CleanupAction{}}
	if err := owner.Validate(); err != nil {
		return report, err
	}
	tctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.opts.TeardownTimeout)
	defer cancel()
	record := func(obj labelled, err error, message string) {
		action := CleanupAction{
			DispatchAttemptID: owner.AttemptID,
			FencingToken:      owner.FencingToken,
			RunnerInstanceID:  owner.RunnerInstanceID,
			ResourceType:      obj.kind,
			ResourceID:        text.Clip(obj.id, 255),
			Outcome:           OutcomeRemoved,
			OccurredAt:        time.Now().UTC(),
		}
		if err != nil || message != "" {
			action.Outcome = OutcomeFailed
			action.Message = message
			if err != nil {
				action.Message = cleanupMessage(err)
			}
		}
		report.Actions = append(report.Actions, action)
	}

	for _, kind := range []string{ResourceContainer, ResourceNetwork, ResourceVolume} {
		objs, err := c.listLabelled(tctx, kind, LabelAttemptID+"="+owner.AttemptID)
		if err != nil {
			report.RemainingUnknown = true
			return report, failure.Wrap(failure.SandboxTeardownFailed, err, "list %ss of attempt %s", kind, owner.AttemptID)
		}
		for _, obj := range objs {
			if owner.Matches(obj.labels) {
				record(obj, c.removeObject(tctx, obj), "")
			}
		}
	}

	failed := map[string]bool{}
	for _, a := range report.Actions {
		if a.Outcome == OutcomeFailed {
			failed[a.ResourceType+"\x00"+a.ResourceID] = true
		}
	}
	for _, kind := range []string{ResourceContainer, ResourceNetwork, ResourceVolume} {
		objs, err := c.listLabelled(tctx, kind, LabelAttemptID+"="+owner.AttemptID)
		if err != nil {
			report.RemainingUnknown = true
			return report, failure.Wrap(failure.SandboxTeardownFailed, err, "list %ss of attempt %s", kind, owner.AttemptID)
		}
		report.Remaining += len(objs)
		for _, obj := range objs {
			if failed[obj.kind+"\x00"+text.Clip(obj.id, 255)] {
				continue
			}
			msg := msgRemained
			if !owner.Matches(obj.labels) {
				msg = msgForeignRemains
			}
			record(obj, nil, msg)
		}
	}
	if err := c.releaseVolumeImages(tctx, owner, record); err != nil {
		failed["image"] = true
	}
	if report.Remaining > 0 || len(failed) > 0 {
		return report, failure.New(failure.SandboxTeardownFailed,
			"%d Docker objects labelled with attempt %s remain after teardown", report.Remaining, owner.AttemptID)
	}
	return report, nil
}

// releaseVolumeImages releases the filesystem images behind the attempt's
// volumes, after the volumes (and so their mounts) are gone, and records
// each as a ResourceVolumeImage action.
func (c *Client) releaseVolumeImages(ctx context.Context, owner Ownership, record func(labelled, error, string)) error {
	if c.opts.VolumeImages == nil {
		return nil
	}
	names, err := NamesFor(owner.AttemptID)
	if err != nil {
		return err
	}
	released, err := c.opts.VolumeImages.ReleaseAttempt(ctx, names.AttemptHex)
	for _, path := range released {
		record(labelled{kind: ResourceVolumeImage, id: path}, nil, "")
	}
	if err != nil {
		record(labelled{kind: ResourceVolumeImage, id: "forge-" + names.AttemptHex + "-*"}, err, "")
	}
	return err
}

// listLabelled lists the objects of one kind carrying every given label
// ("key=value" or "key").
func (c *Client) listLabelled(ctx context.Context, kind string, labels ...string) ([]labelled, error) {
	args := filters.NewArgs()
	for _, l := range labels {
		args.Add("label", l)
	}
	return call(ctx, c, c.opts.Timeouts.List, readCall, func(ctx context.Context) ([]labelled, error) {
		var out []labelled
		switch kind {
		case ResourceContainer:
			list, err := c.cleaner.ContainerList(ctx, container.ListOptions{All: true, Filters: args})
			if err != nil {
				return nil, err
			}
			for _, s := range list {
				name := ""
				if len(s.Names) > 0 {
					name = strings.TrimPrefix(s.Names[0], "/")
				}
				out = append(out, labelled{kind: kind, id: s.ID, name: name, labels: s.Labels, created: unixTime(s.Created), stopped: notRunning(s.State)})
			}
		case ResourceNetwork:
			list, err := c.cleaner.NetworkList(ctx, network.ListOptions{Filters: args})
			if err != nil {
				return nil, err
			}
			for _, n := range list {
				out = append(out, labelled{kind: kind, id: n.ID, name: n.Name, labels: n.Labels, created: n.Created.UTC()})
			}
		case ResourceVolume:
			list, err := c.cleaner.VolumeList(ctx, volume.ListOptions{Filters: args})
			if err != nil {
				return nil, err
			}
			for _, v := range list.Volumes {
				if v != nil {
					out = append(out, labelled{kind: kind, id: v.Name, name: v.Name, labels: v.Labels, created: parseTime(v.CreatedAt)})
				}
			}
		default:
			return nil, fmt.Errorf("unknown resource type %q", kind)
		}
		return out, nil
	})
}

// notRunning reports whether a container list's state names a container
// with no process: created, exited or dead. A container in any other state
// (running, paused, restarting, removing, or one this client does not know)
// is given its stop.
func notRunning(state string) bool {
	switch container.ContainerState(state) {
	case container.StateCreated, container.StateExited, container.StateDead:
		return true
	}
	return false
}

// removeObject removes one object; "not found" is success. A container is
// first given StopGrace to stop, unless the list that found it said it was
// not running (the forced removal kills whatever started since).
func (c *Client) removeObject(ctx context.Context, obj labelled) error {
	api := c.cleaner
	var remove func(ctx context.Context) error
	switch obj.kind {
	case ResourceContainer:
		seconds := int(math.Ceil(c.opts.StopGrace.Seconds()))
		if !obj.stopped {
			_ = callErr(ctx, c, c.opts.StopGrace+c.opts.Timeouts.Stop, writeCall, func(ctx context.Context) error {
				return api.ContainerStop(ctx, obj.id, container.StopOptions{Timeout: &seconds})
			})
		}
		remove = func(ctx context.Context) error {
			return api.ContainerRemove(ctx, obj.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
		}
	case ResourceNetwork:
		remove = func(ctx context.Context) error { return api.NetworkRemove(ctx, obj.id) }
	case ResourceVolume:
		remove = func(ctx context.Context) error { return api.VolumeRemove(ctx, obj.id, true) }
	default:
		return fmt.Errorf("unknown resource type %q", obj.kind)
	}
	err := callErr(ctx, c, c.opts.Timeouts.Remove, writeCall, func(ctx context.Context) error {
		if err := remove(ctx); err != nil && !cerrdefs.IsNotFound(err) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%s remove %s: %w", obj.kind, text.Clip(obj.id, 64), err)
	}
	return nil
}

// cleanupMessage is a bounded single-line rendering of a removal error.
func cleanupMessage(err error) string {
	msg := text.Clip(strings.TrimSpace(blankRuns.ReplaceAllString(err.Error(), " ")), 1000)
	if msg == "" {
		return "Docker object removal failed"
	}
	return msg
}

// ManagedObject is one engine object labelled dev.forge.managed=true.
type ManagedObject struct {
	Kind   string            `json:"kind"` // ResourceContainer, ResourceNetwork or ResourceVolume
	ID     string            `json:"id"`   // the object's id (a volume's name)
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
	// Created is when the engine created the object; zero when unknown.
	// Engines report containers and volumes to the second.
	Created time.Time `json:"created"`
}

// ListManaged lists every container (running or not), network and volume
// labelled dev.forge.managed=true, of any runner, for a reaper to judge.
func (c *Client) ListManaged(ctx context.Context) ([]ManagedObject, error) {
	var out []ManagedObject
	for _, kind := range []string{ResourceContainer, ResourceNetwork, ResourceVolume} {
		objs, err := c.listLabelled(ctx, kind, LabelManaged+"=true")
		if err != nil {
			return nil, opError(ctx, "", err, "list managed %ss", kind)
		}
		for _, obj := range objs {
			out = append(out, ManagedObject{Kind: obj.kind, ID: obj.id, Name: obj.name, Labels: obj.labels, Created: obj.created})
		}
	}
	return out, nil
}

// RemoveManaged removes one managed object as Teardown does (a container
// is stopped first, then force-removed keeping its volumes); an object
// that no longer exists counts as removed.
func (c *Client) RemoveManaged(ctx context.Context, obj ManagedObject) error {
	return c.removeObject(ctx, labelled{kind: obj.Kind, id: obj.ID, name: obj.Name, labels: obj.Labels})
}

// unixTime converts an engine's seconds timestamp; zero stays zero.
func unixTime(seconds int64) time.Time {
	if seconds <= 0 {
		return time.Time{}
	}
	return time.Unix(seconds, 0).UTC()
}

// parseTime parses an engine's RFC 3339 timestamp; anything else is zero.
func parseTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}
	}
	return t.UTC()
}
