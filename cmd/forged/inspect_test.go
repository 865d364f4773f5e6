package main

import (
	"bytes"
	"testing"

	"github.com/forgedev/forged/messages"
)

func TestPrintTreeIndentsChildrenUnderTheirParent(t *testing.T) {
	var out bytes.Buffer
	printTree(&out, []messages.InspectReply{
		{PID: "sup", Kind: "supervisor", Phase: "running", Facts: map[string]string{"slots": "2"}, Children: []string{"sup/attempt-1"}},
		{PID: "sup/attempt-1", Kind: "attempt", Phase: "running", Facts: map[string]string{"image": "", "branch": "forge/x"}, Children: []string{"sup/attempt-1/worker$3"}},
		{PID: "sup/attempt-1/worker$3", Kind: "worker", Phase: "running"},
	})
	want := "supervisor [running] sup  slots=2\n" +
		"  attempt [running] sup/attempt-1  branch=forge/x\n" +
		"    worker [running] sup/attempt-1/worker$3  \n"
	if out.String() != want {
		t.Fatalf("got\n%s\nwant\n%s", out.String(), want)
	}
}
