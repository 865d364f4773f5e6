package fakeengine_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/forgedev/forged/actortest/fakeengine"
	"github.com/forgedev/forged/dockerops"
)

// exampleT stands in for a test's *testing.T: it prints what would fail.
type exampleT struct {
	testing.TB
	cleanups []func()
}

func (t *exampleT) Helper()                   {}
func (t *exampleT) Cleanup(f func())          { t.cleanups = append(t.cleanups, f) }
func (t *exampleT) Errorf(f string, a ...any) { fmt.Printf("FAIL: "+f+"\n", a...) }
func (t *exampleT) Fatalf(f string, a ...any) { t.Errorf(f, a...); panic("the example failed") }
func (t *exampleT) end() {
	for i := len(t.cleanups) - 1; i >= 0; i-- {
		t.cleanups[i]()
	}
}

// The real dockerops client talks to the fake engine; a fault injected at
// one endpoint reaches it as the engine's error, and AssertClean finds
// what a test left labelled.
func ExampleEngine_Inject() {
	t := &exampleT{}
	defer t.end()
	engine := fakeengine.New(t)
	docker, err := dockerops.Connect(context.Background(), dockerops.Options{Host: engine.Host(),
		Retry: dockerops.RetryPolicy{MaxAttempts: 1, MaxElapsed: time.Second}})
	if err != nil {
		panic(err)
	}
	defer docker.Close()

	engine.Inject(fakeengine.OpVolumeCreate, fakeengine.Fault{Status: 500, Message: "no space left on device", Times: 1})
	err = docker.CreateVolume(context.Background(), "forge-a-workspace", map[string]string{dockerops.LabelManaged: "true"})
	fmt.Println(err)
	err = docker.CreateVolume(context.Background(), "forge-a-workspace", map[string]string{dockerops.LabelManaged: "true"})
	fmt.Println(err, engine.CallCount(fakeengine.OpVolumeCreate))
	engine.AssertClean(t, dockerops.LabelManaged)
	// Output:
	// sandbox_create_failed: volume create forge-a-workspace: the Docker engine failed: Error response from daemon: no space left on device
	// <nil> 2
	// FAIL: fakeengine: 1 object(s) labelled dev.forge.managed left: volume forge-a-workspace
}
