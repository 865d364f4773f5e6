package worker

import (
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/forgedev/forged/failure"
)

// The identity of result commits.
const (
	CommitAuthorName  = "forge sandbox"
	CommitAuthorEmail = "sandbox@forge.invalid"
)

// commitMessage is the message of the result commit of an attempt.
func commitMessage(attemptID string) string {
	return "forge: result of attempt " + attemptID + "\n"
}

// commitResult stages the working tree and, when its tree differs from the
// input commit's, writes the result commit (input commit as only parent)
// and moves the attempt's branch (and HEAD) to it. It returns the result
// commit, or the zero hash when the task changed nothing, and the paths
// that could not be committed because git refuses their names.
func (ws *workspace) commitResult(attemptID string) (plumbing.Hash, []string, error) {
	fixPermissions(ws.dir)
	input, err := ws.repo.CommitObject(ws.input)
	if err != nil {
		return plumbing.ZeroHash, nil, failure.Wrap(failure.SandboxWorkerFailed, err, "read the input commit")
	}
	tree, skipped, err := ws.stageTree()
	if err != nil {
		return plumbing.ZeroHash, nil, failure.Wrap(failure.SandboxWorkerFailed, err, "stage the result")
	}
	if tree == input.TreeHash {
		return plumbing.ZeroHash, skipped, nil
	}
	sig := object.Signature{Name: CommitAuthorName, Email: CommitAuthorEmail, When: time.Now().UTC().Truncate(time.Second)}
	result, err := writeObject(ws, &object.Commit{
		Author:       sig,
		Committer:    sig,
		Message:      commitMessage(attemptID),
		TreeHash:     tree,
		ParentHashes: []plumbing.Hash{ws.input},
	})
	if err != nil {
		return plumbing.ZeroHash, nil, failure.Wrap(failure.SandboxWorkerFailed, err, "write the result commit")
	}
	// The refs only describe the workspace; the bundle is what counts.
	if err := ws.storage.SetReference(plumbing.NewHashReference(ws.branch, result)); err == nil {
		_ = ws.storage.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, ws.branch))
	}
	return result, skipped, nil
}
