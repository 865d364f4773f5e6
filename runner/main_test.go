package runner_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/forgedev/forged/dockerops"
	"github.com/forgedev/forged/example"
	"github.com/forgedev/forged/imagegc"
	"github.com/forgedev/forged/preflight"
)

// testProject names the repository of this package's dispatches, so that
// the images its attempts build carry a label no other test run shares and
// can all be removed at the end.
var testProject = "forged-runner-test-" + example.NewUUID()[:8]

func TestMain(m *testing.M) {
	code := m.Run()
	if err := removeTestImages(); err != nil {
		fmt.Fprintf(os.Stderr, "removing the test images: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

func removeTestImages() error {
	engine, err := preflight.NewEngineClient("")
	if err != nil {
		return nil // no engine: nothing was built
	}
	defer engine.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := engine.Ping(ctx); err != nil {
		return nil
	}
	report, err := imagegc.RemoveProject(ctx, engine, dockerops.LabelValue(testProject))
	if err != nil {
		return err
	}
	if len(report.Failed) > 0 {
		return fmt.Errorf("%d images not removed: %s", len(report.Failed), report.Failed[0].Error)
	}
	return nil
}
