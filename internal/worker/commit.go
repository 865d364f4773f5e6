package worker

import (
	"errors"
	"maps"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/messages"
)

// The identity of the commits the worker makes.
const (
	CommitAuthorName  = "forge sandbox"
	CommitAuthorEmail = "sandbox@forge.invalid"
)

// defaultCommitMessage is the message of the worker's commit of an attempt
// when the dispatch gives none.
func defaultCommitMessage(attemptID string) string {
	return "forge: result of attempt " + attemptID + "\n"
}

// commitMessage is the message of the worker's own commit: the task's
// commitMessage (with one final newline), else the default.
func commitMessage(attemptID string, task messages.Task) string {
	if task.CommitMessage == "" {
		return defaultCommitMessage(attemptID)
	}
	return strings.TrimRight(task.CommitMessage, "\n") + "\n"
}

// result is what an attempt produced: the result commit, the objects a
// receiver holding the input's history lacks, and what to report.
type result struct {
	// commit is the result commit; zero when the task changed nothing.
	commit plumbing.Hash
	// prerequisites are the commits outside the result's own history that
	// its commits name as parents: the input, or whatever the task's
	// branch grew from. The host decides whether they are acceptable.
	prerequisites []plumbing.Hash
	// objects are the commits, trees and blobs to send.
	objects []plumbing.Hash
	// commits are the result's own commits, newest first as walked.
	commits []*object.Commit
	// skipped lists the paths left out of the worker's commit because git
	// refuses their names.
	skipped []string
}

// commitResult turns the task's work into the result.
//
// In history mode (the default) the result is the task's branch, HEAD as
// the task left it, with its commits, authors and messages as written;
// whatever the working tree holds beyond the branch's tree becomes one more
// commit on top, authored by the sandbox identity with the dispatch's
// commit message. Nothing is filtered or judged here (not a descent from
// the input, not a name in a tree): the worker reads files the task
// controls, and the host proves everything. In squash mode the task's
// commits are ignored and the result is one commit of the working tree on
// top of the input, as before.
//
// The workspace's attempt branch and HEAD are moved to the result.
func (ws *workspace) commitResult(attemptID string, task messages.Task, note func(string, ...any)) (*result, error) {
	fixPermissions(ws.dir)
	if err := ws.reopen(); err != nil {
		note("the workspace repository cannot be reopened (%v); reading it as materialised", err)
	}
	tip := ws.input
	if !task.Squash() {
		tip = ws.taskTip()
	}
	res := &result{}
	known := ws.knownSet()
	if tip != ws.input {
		if err := ws.collectHistory(tip, res, known); err != nil {
			return nil, failure.Wrap(failure.SandboxWorkerFailed, err, "read the task's commits")
		}
	}
	base, baseTree := tip, ws.treeOf(tip)
	if baseTree == nil {
		// The task's tip has no readable tree: stage against the input's.
		baseTree = ws.treeOf(ws.input)
	}
	if baseTree == nil {
		return nil, failure.New(failure.SandboxWorkerFailed, "read the input commit's tree")
	}
	tree, skipped, err := ws.stageTree(baseTree)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxWorkerFailed, err, "stage the result")
	}
	res.skipped = skipped
	head := tip
	if tree != baseTree.Hash {
		sig := object.Signature{Name: CommitAuthorName, Email: CommitAuthorEmail, When: time.Now().UTC().Truncate(time.Second)}
		commit := &object.Commit{
			Author:       sig,
			Committer:    sig,
			Message:      commitMessage(attemptID, task),
			TreeHash:     tree,
			ParentHashes: []plumbing.Hash{base},
		}
		h, err := writeObject(ws, commit)
		if err != nil {
			return nil, failure.Wrap(failure.SandboxWorkerFailed, err, "write the result commit")
		}
		commit.Hash = h
		head = h
		res.commits = append([]*object.Commit{commit}, res.commits...)
		if len(res.prerequisites) == 0 {
			res.prerequisites = []plumbing.Hash{base}
		}
		objs, err := ws.newObjects([]*object.Commit{commit}, known)
		if err != nil {
			return nil, failure.Wrap(failure.SandboxWorkerFailed, err, "list the result's objects")
		}
		res.objects = append(objs, res.objects...)
	}
	if head == ws.input {
		return res, nil
	}
	res.commit = head
	// The refs only describe the workspace; the bundle is what counts.
	if err := ws.storage.SetReference(plumbing.NewHashReference(ws.branch, head)); err == nil {
		_ = ws.storage.SetReference(plumbing.NewSymbolicReference(plumbing.HEAD, ws.branch))
	}
	return res, nil
}

// taskTip is the commit the task left HEAD at: its branch, or a detached
// HEAD. When HEAD names nothing readable, the attempt's branch is tried,
// then the input (the working tree still holds the task's work).
func (ws *workspace) taskTip() plumbing.Hash {
	for _, name := range []plumbing.ReferenceName{plumbing.HEAD, ws.branch} {
		ref, err := ws.repo.Reference(name, true)
		if err != nil {
			continue
		}
		if _, err := ws.repo.CommitObject(ref.Hash()); err == nil {
			return ref.Hash()
		}
	}
	return ws.input
}

// treeOf returns the tree of commit, nil when it cannot be read.
func (ws *workspace) treeOf(commit plumbing.Hash) *object.Tree {
	c, err := ws.repo.CommitObject(commit)
	if err != nil {
		return nil
	}
	t, err := c.Tree()
	if err != nil {
		return nil
	}
	return t
}

// collectHistory walks the task's commits from tip, stopping at the
// input's history, and records them, the commits they grew from
// (prerequisites) and the objects they need that the input's tree does not
// hold. Parents that cannot be read are prerequisites too: the host has
// them or refuses the result.
//
// The common case, a history that grows from the input without merging
// anything older, is walked with the input commit alone as the stop; only
// when that walk meets a merge, a root or an unreadable commit is the
// input's whole history read to stop at.
func (ws *workspace) collectHistory(tip plumbing.Hash, res *result, known map[plumbing.Hash]bool) error {
	stop := map[plumbing.Hash]bool{ws.input: true}
	commits, prerequisites, simple, err := ws.walkNew(tip, stop, true)
	if err == nil && !simple {
		if stop, err = ws.inputHistory(); err == nil {
			commits, prerequisites, _, err = ws.walkNew(tip, stop, false)
		}
	}
	if err != nil {
		return err
	}
	res.commits, res.prerequisites = commits, prerequisites
	objs, err := ws.newObjects(res.commits, known)
	if err != nil {
		return err
	}
	res.objects = objs
	return nil
}

// walkNew lists the commits reachable from tip without passing through a
// commit in stop, newest first, and the stop commits (or unreadable ones)
// they name as parents. With bail, it gives up (simple false) at the first
// merge, root or unreadable parent.
func (ws *workspace) walkNew(tip plumbing.Hash, stop map[plumbing.Hash]bool, bail bool) (commits []*object.Commit, prerequisites []plumbing.Hash, simple bool, err error) {
	seen := map[plumbing.Hash]bool{}
	prereq := map[plumbing.Hash]bool{}
	addPrereq := func(h plumbing.Hash) {
		if !prereq[h] {
			prereq[h] = true
			prerequisites = append(prerequisites, h)
		}
	}
	queue := []plumbing.Hash{tip}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		if seen[h] {
			continue
		}
		seen[h] = true
		c, err := ws.repo.CommitObject(h)
		switch {
		case err != nil && h == tip:
			return nil, nil, false, err
		case err != nil && bail:
			return nil, nil, false, nil
		case err != nil:
			addPrereq(h)
			continue
		case bail && len(c.ParentHashes) != 1:
			return nil, nil, false, nil
		}
		commits = append(commits, c)
		for _, p := range c.ParentHashes {
			if stop[p] {
				addPrereq(p)
				continue
			}
			queue = append(queue, p)
		}
	}
	return commits, prerequisites, true, nil
}

// inputHistory is the set of commits reachable from the input commit (the
// input bundle's whole history), read once.
func (ws *workspace) inputHistory() (map[plumbing.Hash]bool, error) {
	if ws.history != nil {
		return ws.history, nil
	}
	set := map[plumbing.Hash]bool{}
	queue := []plumbing.Hash{ws.input}
	for len(queue) > 0 {
		h := queue[0]
		queue = queue[1:]
		if set[h] {
			continue
		}
		set[h] = true
		c, err := ws.repo.CommitObject(h)
		if err != nil {
			return nil, err
		}
		queue = append(queue, c.ParentHashes...)
	}
	ws.history = set
	return set, nil
}

// knownSet holds the objects of the input commit's tree: a receiver with
// the input has them.
func (ws *workspace) knownSet() map[plumbing.Hash]bool {
	if ws.inputObjects != nil {
		// As the checkout read them: the same set, without reading
		// every tree again and probing the storage for every blob.
		return maps.Clone(ws.inputObjects)
	}
	known := map[plumbing.Hash]bool{}
	if t := ws.treeOf(ws.input); t != nil {
		_ = ws.walkTree(t.Hash, known, func(plumbing.Hash) {})
	}
	return known
}

// newObjects lists commits and every tree and blob their trees reach that
// known lacks (adding them to known). Objects the repository lacks are
// skipped: the host decides whether it has them legitimately.
func (ws *workspace) newObjects(commits []*object.Commit, known map[plumbing.Hash]bool) ([]plumbing.Hash, error) {
	var objs []plumbing.Hash
	for _, c := range commits {
		if known[c.Hash] {
			continue
		}
		known[c.Hash] = true
		objs = append(objs, c.Hash)
		if err := ws.walkTree(c.TreeHash, known, func(h plumbing.Hash) { objs = append(objs, h) }); err != nil {
			return nil, err
		}
	}
	return objs, nil
}

// walkTree visits the tree h and everything below it that known lacks,
// marking them known. Missing objects are skipped; gitlinks name commits of
// other repositories and are not followed.
func (ws *workspace) walkTree(h plumbing.Hash, known map[plumbing.Hash]bool, visit func(plumbing.Hash)) error {
	if known[h] {
		return nil
	}
	t, err := ws.repo.TreeObject(h)
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return nil
	}
	known[h] = true
	visit(h)
	if err != nil {
		return nil // sent as it is, unread: the host's fsck judges it
	}
	for _, e := range t.Entries {
		switch {
		case e.Mode == filemode.Submodule || known[e.Hash]:
		case e.Mode == filemode.Dir:
			if err := ws.walkTree(e.Hash, known, visit); err != nil {
				return err
			}
		default:
			if ws.storage.HasEncodedObject(e.Hash) != nil {
				continue
			}
			known[e.Hash] = true
			visit(e.Hash)
		}
	}
	return nil
}

// reportedCommits is the bounded (sha, subject) list of the result's
// newest commits.
func (r *result) reportedCommits() []messages.ResultCommit {
	var list []messages.ResultCommit
	for _, c := range r.commits {
		if len(list) == messages.MaxReportedCommits {
			break
		}
		subject, _, _ := strings.Cut(c.Message, "\n")
		list = append(list, messages.ResultCommit{SHA: c.Hash.String(), Subject: messages.BoundedSubject(subject)})
	}
	return list
}
