// Package testimages gives a test package a project name of its own, so
// that every sandbox image its attempts build carries a label no other test
// run shares, and removes those images when the package's tests end.
//
// Sandbox images are labelled dev.forge.project with the dispatch's
// repository name; a test package that names its repositories with
// Project and runs its tests through Main leaves no image behind.
package testimages

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/internal/host/preflight"
	"github.com/forgedev/forged/internal/images/imagegc"
	"github.com/forgedev/forged/internal/kit/ids"
)

// Project returns a fresh project name for the test package pkg.
func Project(pkg string) string {
	return "forged-" + pkg + "-test-" + ids.NewUUID()[:8]
}

// Main runs the package's tests, then removes every image labelled with
// project (RemoveProject), and exits. A removal that fails fails the run.
func Main(m *testing.M, project string) {
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
	report, err := imagegc.RemoveProject(ctx, engine, dockerops.LabelValue(project))
	if err != nil {
		return err
	}
	if len(report.Failed) > 0 {
		return fmt.Errorf("%d images not removed: %s", len(report.Failed), report.Failed[0].Error)
	}
	return nil
}
