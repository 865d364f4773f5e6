package fakeengine

import (
	"bufio"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/image"
	"github.com/docker/docker/api/types/network"
	"github.com/docker/docker/api/types/volume"
	dockerspec "github.com/moby/docker-image-spec/specs-go/v1"
	ocispec "github.com/opencontainers/image-spec/specs-go/v1"
)

// The endpoints, by the Op names calls are recorded and faults injected
// under.
const (
	OpPing             = "ping"
	OpVersion          = "version"
	OpInfo             = "info"
	OpNetworkCreate    = "network.create"
	OpNetworkInspect   = "network.inspect"
	OpNetworkList      = "network.list"
	OpNetworkRemove    = "network.remove"
	OpVolumeCreate     = "volume.create"
	OpVolumeInspect    = "volume.inspect"
	OpVolumeList       = "volume.list"
	OpVolumeRemove     = "volume.remove"
	OpContainerCreate  = "container.create"
	OpContainerInspect = "container.inspect"
	OpContainerList    = "container.list"
	OpContainerStart   = "container.start"
	OpContainerStop    = "container.stop"
	OpContainerKill    = "container.kill"
	OpContainerRemove  = "container.remove"
	OpContainerWait    = "container.wait"
	OpContainerAttach  = "container.attach"
	OpContainerStats   = "container.stats"
	OpArchivePut       = "archive.put"
	OpArchiveGet       = "archive.get"
	OpArchiveStat      = "archive.stat"
	OpExecCreate       = "exec.create"
	OpExecStart        = "exec.start"
	OpExecInspect      = "exec.inspect"
	OpImageBuild       = "image.build"
	OpImageInspect     = "image.inspect"
	OpImageRemove      = "image.remove"
)

var errNotHijackable = errors.New("the connection cannot be hijacked")

// apiError is an engine error answer.
type apiError struct {
	status int
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func notFound(format string, args ...any) error {
	return &apiError{status: http.StatusNotFound, msg: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...any) error {
	return &apiError{status: http.StatusConflict, msg: fmt.Sprintf(format, args...)}
}

func badRequest(format string, args ...any) error {
	return &apiError{status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...)}
}

// statusWriter remembers the status answered, and still hijacks.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// handler is one endpoint: it answers, or returns an error to answer.
type handler func(w http.ResponseWriter, r *http.Request) error

func (e *Engine) routes() http.Handler {
	mux := http.NewServeMux()
	handle := func(pattern, op string, h handler) {
		mux.HandleFunc(pattern, e.endpoint(op, h))
	}
	handle("HEAD /_ping", OpPing, e.ping)
	handle("GET /_ping", OpPing, e.ping)
	handle("GET /version", OpVersion, e.version)
	handle("GET /info", OpInfo, e.infoHandler)

	handle("POST /networks/create", OpNetworkCreate, e.networkCreate)
	handle("GET /networks", OpNetworkList, e.networkList)
	handle("GET /networks/{id}", OpNetworkInspect, e.networkInspect)
	handle("DELETE /networks/{id}", OpNetworkRemove, e.networkRemove)

	handle("POST /volumes/create", OpVolumeCreate, e.volumeCreate)
	handle("GET /volumes", OpVolumeList, e.volumeList)
	handle("GET /volumes/{name}", OpVolumeInspect, e.volumeInspect)
	handle("DELETE /volumes/{name}", OpVolumeRemove, e.volumeRemove)

	handle("POST /containers/create", OpContainerCreate, e.containerCreate)
	handle("GET /containers/json", OpContainerList, e.containerList)
	handle("GET /containers/{id}/json", OpContainerInspect, e.containerInspect)
	handle("POST /containers/{id}/start", OpContainerStart, e.containerStart)
	handle("POST /containers/{id}/stop", OpContainerStop, e.containerStop)
	handle("POST /containers/{id}/kill", OpContainerKill, e.containerKill)
	handle("DELETE /containers/{id}", OpContainerRemove, e.containerRemove)
	handle("POST /containers/{id}/wait", OpContainerWait, e.containerWait)
	handle("POST /containers/{id}/attach", OpContainerAttach, e.containerAttach)
	handle("GET /containers/{id}/stats", OpContainerStats, e.containerStats)
	handle("PUT /containers/{id}/archive", OpArchivePut, e.archivePut)
	handle("GET /containers/{id}/archive", OpArchiveGet, e.archiveGet)
	handle("HEAD /containers/{id}/archive", OpArchiveStat, e.archiveStat)
	handle("POST /containers/{id}/exec", OpExecCreate, e.execCreate)
	handle("POST /exec/{id}/start", OpExecStart, e.execStart)
	handle("GET /exec/{id}/json", OpExecInspect, e.execInspect)

	handle("POST /build", OpImageBuild, e.imageBuild)
	handle("GET /images/{ref...}", OpImageInspect, e.imageInspect)
	handle("DELETE /images/{ref...}", OpImageRemove, e.imageRemove)

	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// "/v1.41/containers/json" → "/containers/json"
		if p := r.URL.Path; strings.HasPrefix(p, "/v1.") {
			if i := strings.IndexByte(p[1:], '/'); i > 0 {
				r.URL.Path = p[1+i:]
				r.URL.RawPath = ""
			}
		}
		mux.ServeHTTP(w, r)
	})
}

// endpoint records the call, applies the op's fault and runs h.
func (e *Engine) endpoint(op string, h handler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		// Recorded on arrival (a client may retry before this handler
		// returns), its status filled in at the end.
		n := e.record(Call{Op: op, Method: r.Method, Path: r.URL.Path, Query: r.URL.RawQuery, At: time.Now()})
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			e.mu.Lock()
			e.calls[n].Status = sw.status
			e.mu.Unlock()
		}()
		if f := e.fault(op, r.URL.Path); f != nil {
			if f.Latency > 0 {
				t := time.NewTimer(f.Latency)
				select {
				case <-t.C:
				case <-r.Context().Done():
					t.Stop()
					return
				}
			}
			if f.Before != nil {
				f.Before()
			}
			if f.Drop {
				if hj, ok := w.(http.Hijacker); ok {
					if conn, _, err := hj.Hijack(); err == nil {
						_ = conn.Close()
					}
				}
				return
			}
			if f.Status != 0 {
				msg := f.Message
				if msg == "" {
					msg = "injected failure of " + op
				}
				writeError(sw, &apiError{status: f.Status, msg: msg})
				return
			}
		}
		// Hijacking handlers need the real writer.
		var target http.ResponseWriter = sw
		if op == OpContainerAttach || op == OpExecStart {
			target = hijackWriter{sw}
		}
		if err := h(target, r); err != nil {
			writeError(sw, err)
		}
	}
}

// hijackWriter is a statusWriter that can still be hijacked.
type hijackWriter struct{ *statusWriter }

func (h hijackWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	h.status = http.StatusSwitchingProtocols
	return h.ResponseWriter.(http.Hijacker).Hijack()
}

func writeError(w http.ResponseWriter, err error) {
	status := http.StatusInternalServerError
	var ae *apiError
	if errors.As(err, &ae) {
		status = ae.status
	}
	writeJSON(w, status, map[string]string{"message": err.Error()})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func decodeBody(r *http.Request, v any) error {
	if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(v); err != nil && !errors.Is(err, io.EOF) {
		return badRequest("invalid JSON: %v", err)
	}
	return nil
}

func queryFilters(r *http.Request) (filters.Args, error) {
	args, err := filters.FromJSON(r.URL.Query().Get("filters"))
	if err != nil {
		return args, badRequest("invalid filters: %v", err)
	}
	return args, nil
}

// matches applies the label and name filters the engine knows.
func matches(args filters.Args, name string, labels map[string]string) bool {
	if args.Contains("label") && !args.MatchKVList("label", labels) {
		return false
	}
	if args.Contains("name") && !args.Match("name", name) {
		return false
	}
	return true
}

func randomHex() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// System.

func (e *Engine) ping(w http.ResponseWriter, r *http.Request) error {
	h := w.Header()
	h.Set("Api-Version", APIVersion)
	h.Set("Ostype", "linux")
	h.Set("Docker-Experimental", "false")
	h.Set("Builder-Version", "1")
	h.Set("Cache-Control", "no-cache, no-store, must-revalidate")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = io.WriteString(w, "OK")
	}
	return nil
}

func (e *Engine) version(w http.ResponseWriter, _ *http.Request) error {
	writeJSON(w, http.StatusOK, types.Version{
		Version: "20.10.99-fake", APIVersion: APIVersion, MinAPIVersion: "1.12",
		Os: "linux", Arch: "amd64", KernelVersion: "fake", GoVersion: "go",
	})
	return nil
}

func (e *Engine) infoHandler(w http.ResponseWriter, _ *http.Request) error {
	e.mu.Lock()
	info := e.info
	info.Containers = len(e.containers)
	info.Images = len(e.images)
	e.mu.Unlock()
	writeJSON(w, http.StatusOK, info)
	return nil
}

// Networks.

func (e *Engine) findNetwork(ref string) (*network.Inspect, error) {
	for _, n := range e.networks {
		if n.ID == ref || n.Name == ref || (len(ref) >= 12 && strings.HasPrefix(n.ID, ref)) {
			return n, nil
		}
	}
	return nil, notFound("network %s not found", ref)
}

func (e *Engine) networkCreate(w http.ResponseWriter, r *http.Request) error {
	var req network.CreateRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		return badRequest("network name is required")
	}
	id := e.nextID()
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.findNetwork(req.Name); err == nil {
		return conflict("network with name %s already exists", req.Name)
	}
	driver := req.Driver
	if driver == "" {
		driver = "bridge"
	}
	ipv6 := req.EnableIPv6 != nil && *req.EnableIPv6
	e.subnets++
	subnet := fmt.Sprintf("172.%d.%d.0/24", 18+e.subnets/256%14, e.subnets%256)
	e.networks[id] = &network.Inspect{
		ID: id, Name: req.Name, Created: e.now().UTC(), Scope: "local", Driver: driver, Internal: req.Internal,
		EnableIPv4: true, EnableIPv6: ipv6, Labels: req.Labels, Options: req.Options,
		Containers: map[string]network.EndpointResource{},
		IPAM:       network.IPAM{Driver: "default", Config: []network.IPAMConfig{{Subnet: subnet, Gateway: strings.TrimSuffix(subnet, "0/24") + "1"}}},
	}
	writeJSON(w, http.StatusCreated, network.CreateResponse{ID: id})
	return nil
}

func (e *Engine) networkList(w http.ResponseWriter, r *http.Request) error {
	args, err := queryFilters(r)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := []network.Summary{}
	for _, n := range e.networks {
		if matches(args, n.Name, n.Labels) {
			out = append(out, *n)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (e *Engine) networkInspect(w http.ResponseWriter, r *http.Request) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, err := e.findNetwork(r.PathValue("id"))
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, n)
	return nil
}

func (e *Engine) networkRemove(w http.ResponseWriter, r *http.Request) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, err := e.findNetwork(r.PathValue("id"))
	if err != nil {
		return err
	}
	for _, c := range e.containers {
		if c.host.NetworkMode.NetworkName() == n.Name || c.host.NetworkMode.NetworkName() == n.ID {
			return &apiError{status: http.StatusForbidden, msg: fmt.Sprintf("error while removing network: network %s id %s has active endpoints", n.Name, n.ID)}
		}
	}
	delete(e.networks, n.ID)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Volumes.

// volumeEntry is a volume and the directory holding its data.
type volumeEntry struct {
	volume.Volume
	dir string
}

func (e *Engine) volumeDir(name string) string {
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.volumes[name]; ok {
		return v.dir
	}
	return ""
}

func (e *Engine) volumeCreate(w http.ResponseWriter, r *http.Request) error {
	var req volume.CreateOptions
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Name == "" {
		req.Name = randomHex()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if v, ok := e.volumes[req.Name]; ok {
		writeJSON(w, http.StatusCreated, v.Volume) // the engine returns the existing volume
		return nil
	}
	dir := filepath.Join(e.dir, "volumes", req.Name)
	if err := mkdirAll(dir); err != nil {
		return err
	}
	v := &volumeEntry{dir: dir, Volume: volume.Volume{
		Name: req.Name, Driver: "local", Labels: req.Labels, Options: req.DriverOpts, Scope: "local",
		Mountpoint: dir, CreatedAt: e.now().UTC().Format(time.RFC3339),
	}}
	e.volumes[req.Name] = v
	writeJSON(w, http.StatusCreated, v.Volume)
	return nil
}

func (e *Engine) volumeList(w http.ResponseWriter, r *http.Request) error {
	args, err := queryFilters(r)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	out := volume.ListResponse{Volumes: []*volume.Volume{}, Warnings: []string{}}
	for _, v := range e.volumes {
		if matches(args, v.Name, v.Labels) {
			cp := v.Volume
			out.Volumes = append(out.Volumes, &cp)
		}
	}
	sort.Slice(out.Volumes, func(i, j int) bool { return out.Volumes[i].Name < out.Volumes[j].Name })
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (e *Engine) volumeInspect(w http.ResponseWriter, r *http.Request) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.volumes[r.PathValue("name")]
	if !ok {
		return notFound("get %s: no such volume", r.PathValue("name"))
	}
	writeJSON(w, http.StatusOK, v.Volume)
	return nil
}

func (e *Engine) volumeRemove(w http.ResponseWriter, r *http.Request) error {
	name := r.PathValue("name")
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.volumes[name]
	if !ok {
		return notFound("get %s: no such volume", name)
	}
	for _, c := range e.containers {
		for _, m := range c.host.Mounts {
			if m.Source == name {
				return conflict("remove %s: volume is in use - [%s]", name, c.id)
			}
		}
	}
	delete(e.volumes, name)
	_ = os.RemoveAll(v.dir)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Images.

// imageEntry is an image of the engine.
type imageEntry struct {
	id     string
	tags   []string
	labels map[string]string
}

// AddImage adds an image tagged ref (as if pulled or built), and returns
// its id.
func (e *Engine) AddImage(ref string, labels map[string]string) string {
	id := "sha256:" + randomHex()
	e.mu.Lock()
	defer e.mu.Unlock()
	e.images[id] = &imageEntry{id: id, tags: []string{ref}, labels: labels}
	e.tags[normalRef(ref)] = id
	return id
}

// HasImage reports whether ref names an image.
func (e *Engine) HasImage(ref string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, ok := e.findImage(ref)
	return ok
}

func normalRef(ref string) string {
	if !strings.Contains(ref[strings.LastIndexByte(ref, '/')+1:], ":") && !strings.Contains(ref, "@") {
		return ref + ":latest"
	}
	return ref
}

func (e *Engine) findImage(ref string) (*imageEntry, bool) {
	if img, ok := e.images[ref]; ok {
		return img, true
	}
	if id, ok := e.tags[normalRef(ref)]; ok {
		return e.images[id], true
	}
	return nil, false
}

func (e *Engine) imageBuild(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	var labels map[string]string
	if l := q.Get("labels"); l != "" {
		if err := json.Unmarshal([]byte(l), &labels); err != nil {
			return badRequest("invalid labels: %v", err)
		}
	}
	// The context is read whole, as the engine does before building.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return badRequest("reading the build context: %v", err)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	enc := json.NewEncoder(w)
	_ = enc.Encode(map[string]string{"stream": "Step 1/1 : FROM scratch\n"})
	if msg, failed := e.takeBuildFailure(); failed {
		_ = enc.Encode(map[string]any{"errorDetail": map[string]string{"message": msg}, "error": msg})
		return nil
	}
	id := "sha256:" + randomHex()
	e.mu.Lock()
	img := &imageEntry{id: id, labels: labels}
	for _, t := range q["t"] {
		if old, ok := e.tags[normalRef(t)]; ok {
			if prev := e.images[old]; prev != nil {
				prev.tags = removeString(prev.tags, t)
			}
		}
		e.tags[normalRef(t)] = id
		img.tags = append(img.tags, t)
	}
	e.images[id] = img
	e.mu.Unlock()
	_ = enc.Encode(map[string]any{"aux": map[string]string{"ID": id}})
	_ = enc.Encode(map[string]string{"stream": "Successfully built " + id[7:19] + "\n"})
	return nil
}

func removeString(list []string, s string) []string {
	out := list[:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}

// FailBuilds makes the next n builds fail in their stream with message, as
// a failing Dockerfile step does.
func (e *Engine) FailBuilds(n int, message string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.buildFailures = append(e.buildFailures, buildFailure{n: n, msg: message})
}

type buildFailure struct {
	n   int
	msg string
}

func (e *Engine) takeBuildFailure() (string, bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for len(e.buildFailures) > 0 {
		f := &e.buildFailures[0]
		if f.n <= 0 {
			e.buildFailures = e.buildFailures[1:]
			continue
		}
		f.n--
		return f.msg, true
	}
	return "", false
}

func (e *Engine) imageInspect(w http.ResponseWriter, r *http.Request) error {
	ref, ok := strings.CutSuffix(r.PathValue("ref"), "/json")
	if !ok {
		return notFound("page not found")
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	img, found := e.findImage(ref)
	if !found {
		return notFound("No such image: %s", ref)
	}
	writeJSON(w, http.StatusOK, image.InspectResponse{
		ID: img.id, RepoTags: append([]string{}, img.tags...), Os: "linux", Architecture: "amd64",
		Config: &dockerspec.DockerOCIImageConfig{ImageConfig: ocispec.ImageConfig{Labels: img.labels}},
	})
	return nil
}

func (e *Engine) imageRemove(w http.ResponseWriter, r *http.Request) error {
	ref := r.PathValue("ref")
	e.mu.Lock()
	defer e.mu.Unlock()
	img, found := e.findImage(ref)
	if !found {
		return notFound("No such image: %s", ref)
	}
	var out []image.DeleteResponse
	if img.id != ref && len(img.tags) > 1 {
		img.tags = removeString(img.tags, ref)
		delete(e.tags, normalRef(ref))
		out = append(out, image.DeleteResponse{Untagged: ref})
	} else {
		for _, c := range e.containers {
			if c.imageID == img.id {
				return conflict("conflict: unable to delete %s (must be forced) - image is being used by container %s", ref, c.id[:12])
			}
		}
		for _, t := range img.tags {
			delete(e.tags, normalRef(t))
			out = append(out, image.DeleteResponse{Untagged: t})
		}
		delete(e.images, img.id)
		out = append(out, image.DeleteResponse{Deleted: img.id})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// Execs.

func (e *Engine) execCreate(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	var req container.ExecOptions
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if !c.State().Running {
		return conflict("container %s is not running", c.id)
	}
	id := randomHex()
	e.mu.Lock()
	e.execs[id] = &execInstance{id: id, container: c, cmd: req.Cmd, user: req.User}
	e.mu.Unlock()
	writeJSON(w, http.StatusCreated, container.ExecCreateResponse{ID: id})
	return nil
}

func (e *Engine) execStart(w http.ResponseWriter, r *http.Request) error {
	e.mu.Lock()
	x, ok := e.execs[r.PathValue("id")]
	e.mu.Unlock()
	if !ok {
		return notFound("No such exec instance: %s", r.PathValue("id"))
	}
	// The start options are read before the connection is hijacked: what
	// follows them is the exec's stdin.
	var opts container.ExecStartOptions
	if err := decodeBody(r, &opts); err != nil {
		return err
	}
	x.mu.Lock()
	if x.started {
		x.mu.Unlock()
		return conflict("exec %s has already run", x.id)
	}
	x.started, x.running = true, true
	x.mu.Unlock()
	att, err := e.hijack(w, nil)
	if err != nil {
		return err
	}
	program := e.execProgram(x.cmd)
	ctx := r.Context()
	go func() {
		code := program(ctx, &Process{Container: x.container, Stdin: att.stdin, Stdout: att.stdout, Stderr: att.stderr})
		x.mu.Lock()
		x.running, x.exitCode = false, code
		x.mu.Unlock()
		att.close()
	}()
	return nil
}

func (e *Engine) execInspect(w http.ResponseWriter, r *http.Request) error {
	e.mu.Lock()
	x, ok := e.execs[r.PathValue("id")]
	e.mu.Unlock()
	if !ok {
		return notFound("No such exec instance: %s", r.PathValue("id"))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	writeJSON(w, http.StatusOK, container.ExecInspect{ExecID: x.id, ContainerID: x.container.id, Running: x.running, ExitCode: x.exitCode})
	return nil
}

// parseBool reads the engine's boolean query values ("1", "true").
func parseBool(s string) bool {
	b, err := strconv.ParseBool(s)
	return err == nil && b
}
