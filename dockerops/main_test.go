package dockerops

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	code := m.Run()
	removeTestImages()
	os.Exit(code)
}
