package services

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/kit/text"
)

// Bounds of a catalogue file.
const (
	maxCatalogueBytes = 64 << 10
	maxRefBytes       = 255
)

var refPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._/-]*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?$`)

// Entry is one catalogue line: the service, the image reference operators
// know it by, and the image id it is pinned to.
type Entry struct {
	Service string `json:"service"`
	Ref     string `json:"ref"`
	ImageID string `json:"imageId"`
}

// Catalogue maps services to their pinned images. The zero value (and nil)
// configures no service.
type Catalogue struct {
	entries map[string]Entry
}

// Load reads a catalogue file (see Parse).
func Load(path string) (*Catalogue, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("service catalogue: %w", err)
	}
	defer f.Close()
	c, err := Parse(io.LimitReader(f, maxCatalogueBytes+1))
	if err != nil {
		return nil, fmt.Errorf("service catalogue %s: %w", path, err)
	}
	return c, nil
}

// Parse reads a catalogue: one service a line, tab-separated fields
// `service ref imageId [more...]` (the further fields scripts/service-
// images.sh writes, size and packages, are ignored). Blank lines and lines
// starting with '#' are skipped. Unknown services, malformed references or
// ids, duplicate services and files over 64 KiB are refused.
func Parse(r io.Reader) (*Catalogue, error) {
	c := &Catalogue{entries: map[string]Entry{}}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 4096), maxCatalogueBytes)
	total, line := 0, 0
	for sc.Scan() {
		line++
		total += len(sc.Bytes()) + 1
		if total > maxCatalogueBytes {
			return nil, fmt.Errorf("larger than %d bytes", maxCatalogueBytes)
		}
		raw := strings.TrimRight(sc.Text(), "\r")
		if strings.TrimSpace(raw) == "" || strings.HasPrefix(raw, "#") {
			continue
		}
		fields := strings.Split(raw, "\t")
		if len(fields) < 3 {
			return nil, fmt.Errorf("line %d: want service, ref and image id separated by tabs", line)
		}
		e := Entry{Service: fields[0], Ref: fields[1], ImageID: fields[2]}
		if _, ok := definitions[e.Service]; !ok && e.Service != Egress {
			return nil, fmt.Errorf("line %d: unknown service %q", line, text.Clip(e.Service, 32))
		}
		if len(e.Ref) > maxRefBytes || !refPattern.MatchString(e.Ref) {
			return nil, fmt.Errorf("line %d: image reference %q is not a local name[:tag]", line, text.Clip(e.Ref, 64))
		}
		if !ids.IsImageID(e.ImageID) {
			return nil, fmt.Errorf("line %d: image id %q is not sha256:<64 hex>", line, text.Clip(e.ImageID, 80))
		}
		if _, dup := c.entries[e.Service]; dup {
			return nil, fmt.Errorf("line %d: service %s is listed twice", line, e.Service)
		}
		c.entries[e.Service] = e
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	return c, nil
}

// Lookup returns the service's entry.
func (c *Catalogue) Lookup(service string) (Entry, bool) {
	if c == nil {
		return Entry{}, false
	}
	e, ok := c.entries[service]
	return e, ok
}

// Entries returns the entries sorted by service.
func (c *Catalogue) Entries() []Entry {
	if c == nil {
		return nil
	}
	out := make([]Entry, 0, len(c.entries))
	for _, e := range c.entries {
		out = append(out, e)
	}
	slices.SortFunc(out, func(a, b Entry) int { return strings.Compare(a.Service, b.Service) })
	return out
}

// ImageInspector finds a local image's id; *dockerops.Client is one.
type ImageInspector interface {
	ImageID(ctx context.Context, ref string) (id string, found bool, err error)
}

// Verify checks every service against the catalogue and the engine and
// returns their entries: a service forged cannot run is
// sandbox_services_unsupported, one without an entry or whose image is not
// in the engine sandbox_service_unavailable, an
// image whose id is not the pinned one sandbox_service_image_mismatch. The
// engine is only asked, never told to pull.
func (c *Catalogue) Verify(ctx context.Context, docker ImageInspector, services []string) (map[string]Entry, error) {
	out := make(map[string]Entry, len(services))
	for _, s := range services {
		if _, ok := definitions[s]; !ok {
			return nil, failure.New(failure.SandboxServicesUnsupported, "service %s is not available on this runner yet", s)
		}
		e, ok := c.Lookup(s)
		if !ok {
			return nil, failure.New(failure.SandboxServiceUnavailable, "service %s has no image in this runner's service catalogue", s)
		}
		id, found, err := docker.ImageID(ctx, e.Ref)
		if err != nil {
			return nil, failure.Wrap(failure.SandboxServiceUnavailable, err, "service %s: inspect image %s", s, e.Ref)
		}
		if !found {
			return nil, failure.New(failure.SandboxServiceUnavailable, "service %s: image %s is not in the engine (nothing is pulled; run scripts/service-images.sh)", s, e.Ref)
		}
		if id != e.ImageID {
			return nil, failure.New(failure.SandboxServiceImageDiffers, "service %s: image %s is %s, the catalogue pins %s", s, e.Ref, id, e.ImageID)
		}
		out[s] = e
	}
	return out, nil
}

// VerifyEgress checks the egress proxy's entry against the engine and
// returns it: no entry, or an image the engine does not hold, is
// sandbox_egress_proxy_unavailable; an image whose id is not the pinned one
// sandbox_service_image_mismatch. Nothing is pulled.
func (c *Catalogue) VerifyEgress(ctx context.Context, docker ImageInspector) (Entry, error) {
	e, ok := c.Lookup(Egress)
	if !ok {
		return Entry{}, failure.New(failure.SandboxEgressUnsupported, "public_allowlist and open_public need the %s image (the egress proxy and the netns guard run from it), and this runner's service catalogue has none: add it (scripts/service-images.sh)", Egress)
	}
	id, found, err := docker.ImageID(ctx, e.Ref)
	if err != nil {
		return Entry{}, failure.Wrap(failure.SandboxEgressUnsupported, err, "egress proxy: inspect image %s", e.Ref)
	}
	if !found {
		return Entry{}, failure.New(failure.SandboxEgressUnsupported, "egress proxy: image %s is not in the engine (nothing is pulled; run scripts/service-images.sh)", e.Ref)
	}
	if id != e.ImageID {
		return Entry{}, failure.New(failure.SandboxServiceImageDiffers, "egress proxy: image %s is %s, the catalogue pins %s", e.Ref, id, e.ImageID)
	}
	return e, nil
}

// Status is one catalogue entry's state in the engine, as preflight
// reports it.
type Status struct {
	Entry
	// State is "ready", "missing", "mismatch" or "unknown" (the engine
	// could not be asked).
	State  string `json:"state"`
	Detail string `json:"detail,omitempty"`
}

// Check reports every entry's state in the engine.
func (c *Catalogue) Check(ctx context.Context, docker ImageInspector) []Status {
	var out []Status
	for _, e := range c.Entries() {
		st := Status{Entry: e, State: "ready"}
		id, found, err := docker.ImageID(ctx, e.Ref)
		switch {
		case err != nil:
			st.State, st.Detail = "unknown", text.Clip(err.Error(), 200)
		case !found:
			st.State = "missing"
		case id != e.ImageID:
			st.State, st.Detail = "mismatch", "engine has "+id
		}
		out = append(out, st)
	}
	return out
}
