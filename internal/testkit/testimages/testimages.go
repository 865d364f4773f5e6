// Package testimages gives a test package a project name of its own, so
// that every sandbox image its attempts build carries a label no other test
// run shares, and removes those images when the package's tests end.
//
// Sandbox images are labelled dev.forge.project with the dispatch's
// repository name; a test package that names its repositories with
// Project and runs its tests through Main leaves no image behind. A test
// process killed before its Main could remove them (go test's -timeout, a
// kill by hand) leaves its images to the next Main on the engine, which
// removes the projects of every test process that has ended: a project
// names its process.
package testimages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/ids"
	"github.com/forgedev/forged/internal/testkit/testbin"
)

// Project returns a fresh project name for the test package pkg, naming
// this test process: forged-PKG-test-PID-RANDOM.
func Project(pkg string) string {
	return fmt.Sprintf("forged-%s-test-%d-%s", pkg, os.Getpid(), ids.NewUUID()[:8])
}

// projectName matches a Project name; its group is the process's pid.
var projectName = regexp.MustCompile(`^forged-[a-z0-9-]+-test-([0-9]+)-[0-9a-f]{8}$`)

// Main removes the images of ended test processes (sweepEnded), runs the
// package's tests, then removes every image labelled with project
// (RemoveProject), and exits. A removal of the package's own images that
// fails fails the run; a failed sweep is only reported.
func Main(m *testing.M, project string) {
	if err := withEngine(func(ctx context.Context, engine imagegc.EngineAPI) error {
		_, err := sweepEnded(ctx, engine, testbin.Running)
		return err
	}); err != nil {
		fmt.Fprintf(os.Stderr, "removing the test images of ended test processes: %v\n", err)
	}
	code := m.Run()
	if err := RemoveProject(project); err != nil {
		fmt.Fprintf(os.Stderr, "removing the test images of %s: %v\n", project, err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// RemoveProject removes the images of project, tagged or dangling. Without
// an engine nothing was built, and nothing is done.
func RemoveProject(project string) error {
	return withEngine(func(ctx context.Context, engine imagegc.EngineAPI) error {
		return removeProject(ctx, engine, dockerops.LabelValue(project))
	})
}

func removeProject(ctx context.Context, engine imagegc.EngineAPI, project string) error {
	report, err := imagegc.RemoveProject(ctx, engine, project)
	if err != nil {
		return err
	}
	if len(report.Failed) > 0 {
		return fmt.Errorf("%d images of %s not removed: %s", len(report.Failed), project, report.Failed[0].Error)
	}
	return nil
}

// withEngine calls f with the local engine, within two minutes; without
// an engine that answers, nothing was built, and nothing is done.
func withEngine(f func(ctx context.Context, engine imagegc.EngineAPI) error) error {
	engine, err := preflight.NewEngineClient("")
	if err != nil {
		return nil
	}
	defer engine.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := engine.Ping(ctx); err != nil {
		return nil
	}
	return f(ctx, engine)
}

// sweepEnded removes the images of every test project (projectName) whose
// process isRunning says has ended, other than this one's, and returns
// those projects. Other projects are left alone.
func sweepEnded(ctx context.Context, engine imagegc.EngineAPI, isRunning func(pid int) bool) ([]string, error) {
	tagged, dangling, err := imagegc.List(ctx, engine, "")
	if err != nil {
		return nil, err
	}
	var ended []string
	var errs []error
	for _, img := range append(tagged, dangling...) {
		m := projectName.FindStringSubmatch(img.Project)
		if m == nil || slices.Contains(ended, img.Project) {
			continue
		}
		pid, err := strconv.Atoi(m[1])
		if err != nil || pid == os.Getpid() || isRunning(pid) {
			continue
		}
		ended = append(ended, img.Project)
		errs = append(errs, removeProject(ctx, engine, img.Project))
	}
	return ended, errors.Join(errs...)
}
