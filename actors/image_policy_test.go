package actors

import (
	"testing"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/images/imagepolicy"
	"github.com/forgedev/forged/messages"
)

// Under an enforced image policy that lacks a part, sandbox_required is
// refused before anything is looked up or built; adoption goes on to the
// Dockerfile policy.
func TestSandboxRequiredDemandsTheWholeImagePolicy(t *testing.T) {
	policy, err := imagepolicy.New(imagepolicy.Config{Enforced: true})
	if err != nil || policy == nil {
		t.Fatalf("policy %v, %v", policy, err)
	}
	b := &imageBuilder{policy: policy, allowPulls: true}
	err = b.checkPolicy(t.Context(), sandboxImageJob{policy: messages.PolicySandboxRequired, dockerfile: []byte("FROM scratch\n")})
	if failure.CodeOf(err) != failure.SandboxImagePolicy {
		t.Fatalf("sandbox_required: %v", err)
	}
	if err := b.checkPolicy(t.Context(), sandboxImageJob{policy: messages.PolicyAdoption, dockerfile: []byte("FROM scratch\n")}); err != nil {
		t.Fatalf("adoption: %v", err)
	}
	b.policy = nil
	if err := b.checkPolicy(t.Context(), sandboxImageJob{policy: messages.PolicyAdoption, dockerfile: []byte("FROM scratch\n")}); err != nil {
		t.Fatalf("no image policy: %v", err)
	}
}
