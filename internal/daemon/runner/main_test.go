package runner_test

import (
	"testing"

	"github.com/forgedev/forged/internal/testkit/testimages"
)

// testProject names the repository of this package's dispatches, so that
// the images its attempts build carry a label no other test run shares and
// can all be removed at the end.
var testProject = testimages.Project("runner")

func TestMain(m *testing.M) { testimages.Main(m, testProject) }
