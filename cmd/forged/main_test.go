package main_test

import (
	"testing"

	"github.com/forgedev/forged/internal/testkit/testimages"
)

// testProject names the repository of this package's dispatches (in
// process, and `forged example --project`), so that the images its
// attempts build can all be removed at the end.
var testProject = testimages.Project("cmd")

func TestMain(m *testing.M) { testimages.Main(m, testProject) }
