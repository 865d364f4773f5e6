package fakeengine

import (
	"archive/tar"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/network"
	"golang.org/x/sys/unix"
)

// container finds a container by id, unambiguous id prefix or name.
func (e *Engine) container(ref string) (*Container, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.containerLocked(ref)
}

func (e *Engine) containerLocked(ref string) (*Container, error) {
	ref = strings.TrimPrefix(ref, "/")
	if c, ok := e.containers[ref]; ok {
		return c, nil
	}
	for _, c := range e.containers {
		if c.name == ref || (len(ref) >= 12 && strings.HasPrefix(c.id, ref)) {
			return c, nil
		}
	}
	return nil, notFound("No such container: %s", ref)
}

// Container returns the container named or identified by ref, or nil.
func (e *Engine) Container(ref string) *Container {
	c, _ := e.container(ref)
	return c
}

func (e *Engine) containerCreate(w http.ResponseWriter, r *http.Request) error {
	var req container.CreateRequest
	if err := decodeBody(r, &req); err != nil {
		return err
	}
	if req.Config == nil {
		return badRequest("config cannot be empty in order to create a container")
	}
	if req.HostConfig == nil {
		req.HostConfig = &container.HostConfig{}
	}
	name := r.URL.Query().Get("name")
	id := e.nextID()
	if name == "" {
		name = "fake_" + id[:12]
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.containerLocked(name); err == nil {
		return conflict(`Conflict. The container name "/%s" is already in use by container. You have to remove (or rename) that container to be able to reuse that name.`, name)
	}
	img, ok := e.findImage(req.Image)
	if !ok {
		return notFound("No such image: %s", req.Image)
	}
	for _, m := range req.HostConfig.Mounts {
		if m.Type == "volume" {
			if _, ok := e.volumes[m.Source]; !ok {
				return notFound("get %s: no such volume", m.Source)
			}
		}
	}
	if mode := req.HostConfig.NetworkMode; mode.IsUserDefined() {
		if _, err := e.findNetwork(mode.NetworkName()); err != nil {
			return err
		}
	}
	// The engine merges the image's labels under the container's.
	labels := map[string]string{}
	for k, v := range img.labels {
		labels[k] = v
	}
	for k, v := range req.Config.Labels {
		labels[k] = v
	}
	cfg := *req.Config
	cfg.Labels = labels
	root := filepath.Join(e.dir, "containers", id)
	if err := mkdirAll(root); err != nil {
		return err
	}
	c := &Container{
		engine: e, id: id, name: name, created: e.now().UTC(), config: &cfg, host: req.HostConfig, root: root,
		imageID: img.id, state: container.State{Status: container.StateCreated},
	}
	c.program = e.programForLocked(c)
	e.containers[id] = c
	writeJSON(w, http.StatusCreated, container.CreateResponse{ID: id, Warnings: []string{}})
	return nil
}

func (e *Engine) containerList(w http.ResponseWriter, r *http.Request) error {
	args, err := queryFilters(r)
	if err != nil {
		return err
	}
	all := parseBool(r.URL.Query().Get("all"))
	e.mu.Lock()
	list := make([]*Container, 0, len(e.containers))
	for _, c := range e.containers {
		list = append(list, c)
	}
	e.mu.Unlock()
	sort.Slice(list, func(i, j int) bool { return list[i].name < list[j].name })
	out := []container.Summary{}
	for _, c := range list {
		s := c.State()
		if (!all && !s.Running) || !matches(args, c.name, c.config.Labels) {
			continue
		}
		out = append(out, container.Summary{
			ID: c.id, Names: []string{"/" + c.name}, Image: c.config.Image, ImageID: c.imageID,
			Labels: c.config.Labels, Created: c.created.Unix(), State: string(s.Status), Status: string(s.Status),
		})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

func (e *Engine) containerInspect(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	state := c.State()
	writeJSON(w, http.StatusOK, container.InspectResponse{
		ContainerJSONBase: &container.ContainerJSONBase{
			ID: c.id, Name: "/" + c.name, Created: c.created.Format(time.RFC3339Nano), Image: c.imageID,
			State: &state, HostConfig: c.host, Driver: "overlay2",
		},
		Config:          c.config,
		NetworkSettings: &container.NetworkSettings{Networks: map[string]*network.EndpointSettings{}},
	})
	return nil
}

func (e *Engine) containerStart(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	if c.State().Running {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	c.start()
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (e *Engine) containerStop(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	if !c.State().Running {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	c.kill(137, "")
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// containerKill sends the signal of the query (SIGKILL when none):
// SIGKILL and SIGTERM end the program, any other is delivered to it
// (Process.Signals). A container not running answers 409, as the engine's
// does.
func (e *Engine) containerKill(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	sig, err := parseSignal(r.URL.Query().Get("signal"))
	if err != nil {
		return badRequest("%v", err)
	}
	notRunning := func() error { return conflict("Container %s is not running", c.id) }
	if sig == syscall.SIGKILL || sig == syscall.SIGTERM {
		if !c.State().Running {
			return notRunning()
		}
		c.kill(137, "")
	} else if !c.signal(sig) {
		return notRunning()
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// parseSignal reads a kill call's signal as the engine accepts it: a name
// with or without "SIG", or a number; empty is SIGKILL.
func parseSignal(s string) (syscall.Signal, error) {
	if s == "" {
		return syscall.SIGKILL, nil
	}
	if n, err := strconv.Atoi(s); err == nil && n > 0 && n < 65 {
		return syscall.Signal(n), nil
	}
	name := strings.TrimPrefix(strings.ToUpper(s), "SIG")
	for n := syscall.Signal(1); n < 32; n++ {
		if strings.TrimPrefix(strings.ToUpper(unix.SignalName(n)), "SIG") == name {
			return n, nil
		}
	}
	return 0, fmt.Errorf("invalid signal: %s", s)
}

func (e *Engine) containerRemove(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	if c.State().Running {
		if !parseBool(r.URL.Query().Get("force")) {
			return conflict("You cannot remove a running container %s. Stop the container before attempting removal or force remove", c.id)
		}
		c.kill(137, "")
	}
	e.mu.Lock()
	delete(e.containers, c.id)
	e.mu.Unlock()
	c.detach()
	_ = os.RemoveAll(c.root)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (e *Engine) containerWait(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	// Every condition is answered like not-running: a container that is
	// not running answers at once with its last exit.
	exited := c.waitExit()
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
	if exited != nil {
		select {
		case <-exited:
		case <-r.Context().Done():
			return nil
		}
	}
	s := c.State()
	resp := container.WaitResponse{StatusCode: int64(s.ExitCode)}
	if s.Error != "" {
		resp.Error = &container.WaitExitError{Message: s.Error}
	}
	_ = json.NewEncoder(w).Encode(resp)
	return nil
}

func (e *Engine) containerAttach(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	if c.State().Running {
		return conflict("attaching to a running container is not supported by the fake engine")
	}
	_, err = e.hijack(w, func(att *attachment) {
		c.mu.Lock()
		if c.attached != nil {
			c.attached.close()
		}
		c.attached = att
		c.mu.Unlock()
	})
	return err
}

func (e *Engine) containerStats(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	c.mu.Lock()
	mem := c.memory
	running := c.state.Running
	c.mu.Unlock()
	if !running {
		mem = container.MemoryStats{}
	}
	writeJSON(w, http.StatusOK, container.StatsResponse{
		Name: "/" + c.name, ID: c.id, Read: e.now().UTC(),
		MemoryStats: mem,
	})
	return nil
}

// Archives.

func pathStat(hostPath, name string) (container.PathStat, error) {
	fi, err := os.Lstat(hostPath)
	if err != nil {
		return container.PathStat{}, err
	}
	return container.PathStat{Name: name, Size: fi.Size(), Mode: fi.Mode(), Mtime: fi.ModTime()}, nil
}

func setStatHeader(w http.ResponseWriter, st container.PathStat) {
	raw, _ := json.Marshal(st)
	w.Header().Set("X-Docker-Container-Path-Stat", base64.StdEncoding.EncodeToString(raw))
}

func (e *Engine) archiveStat(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	p := r.URL.Query().Get("path")
	st, err := pathStat(c.hostPath(p), path.Base(p))
	if err != nil {
		return notFound("Could not find the file %s in container %s", p, c.id)
	}
	setStatHeader(w, st)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (e *Engine) archiveGet(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	p := r.URL.Query().Get("path")
	contents := strings.HasSuffix(p, "/.") // "dir/." copies the directory's contents
	src := c.hostPath(strings.TrimSuffix(p, "/."))
	st, err := pathStat(src, path.Base(strings.TrimSuffix(p, "/.")))
	if err != nil {
		return notFound("Could not find the file %s in container %s", p, c.id)
	}
	setStatHeader(w, st)
	w.Header().Set("Content-Type", "application/x-tar")
	w.WriteHeader(http.StatusOK)
	prefix := st.Name
	if contents {
		prefix = "."
	}
	tw := tar.NewWriter(w)
	err = filepath.WalkDir(src, func(file string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, file)
		name := path.Join(prefix, filepath.ToSlash(rel))
		info, err := d.Info()
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&fs.ModeSymlink != 0 {
			if link, err = os.Readlink(file); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = name
		if d.IsDir() {
			hdr.Name += "/"
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if info.Mode().IsRegular() {
			f, err := os.Open(file)
			if err != nil {
				return err
			}
			_, err = io.Copy(tw, f)
			_ = f.Close()
			return err
		}
		return nil
	})
	if err == nil {
		err = tw.Close()
	}
	if err != nil {
		// Headers are sent: cut the stream, as an engine failing mid-copy.
		panic(http.ErrAbortHandler)
	}
	return nil
}

func (e *Engine) archivePut(w http.ResponseWriter, r *http.Request) error {
	c, err := e.container(r.PathValue("id"))
	if err != nil {
		return err
	}
	dst := c.hostPath(r.URL.Query().Get("path"))
	// The engine requires the destination directory; the fake's
	// containers start with an empty filesystem, so it is made.
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	root, err := os.OpenRoot(dst)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	tr := tar.NewReader(r.Body)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return badRequest("archive: %v", err)
		}
		name := path.Clean(strings.TrimPrefix(hdr.Name, "/"))
		if name == "." {
			continue
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, 0o755); err != nil {
				return err
			}
		case tar.TypeReg:
			if dir := path.Dir(name); dir != "." {
				if err := root.MkdirAll(dir, 0o755); err != nil {
					return err
				}
			}
			f, err := root.OpenFile(name, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, fs.FileMode(hdr.Mode)&0o777|0o200)
			if err != nil {
				return err
			}
			_, err = io.Copy(f, tr)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		default:
			return badRequest("archive entry %s: type %c is not supported by the fake engine", hdr.Name, hdr.Typeflag)
		}
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// WriteFile writes a file into the container's filesystem (a program's
// output, for instance), creating its directories.
func (c *Container) WriteFile(inContainer string, data []byte) error {
	p := c.hostPath(inContainer)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, data, 0o644)
}

// ReadFile reads a file of the container's filesystem.
func (c *Container) ReadFile(inContainer string) ([]byte, error) {
	b, err := os.ReadFile(c.hostPath(inContainer))
	if err != nil {
		return nil, fmt.Errorf("container %s: %w", c.name, err)
	}
	return b, nil
}

// detach ends the stream of a client attached to a container that never
// started.
func (c *Container) detach() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.attached != nil {
		c.attached.close()
		c.attached = nil
	}
}
