package gitops

import (
	"bytes"
	"context"
	"strings"

	"github.com/forgedev/forged/failure"
)

// Rewriting a result's identities (the publish policy's AuthorRewrite).
//
// A result's commits carry whatever author and committer the task wrote.
// Under AuthorRewrite the host re-creates each commit of input..result in
// the quarantine, after the quarantine proved the result and before
// anything of it reaches the host repository: the same tree, the same
// parents (rewritten ones where the parent was rewritten too), the same
// message and dates, and the operator's identity as author and committer.
// A signature is dropped (it no longer signs the commit). The managed
// branch then moves, fenced as ever, to the rewritten result, which is
// what a bridge_push publication pushes: the managed branch and the remote
// never diverge.

// rewriteIdentities re-creates every commit of input..result (oldest
// first) with id as author and committer and returns the rewritten
// result. Malformed commit objects are failure.SandboxOutputInvalid.
func (q *quarantine) rewriteIdentities(ctx context.Context, input, result string, id Identity) (string, error) {
	list, err := q.run(ctx, RunOpts{Timeout: walkTimeout, MaxOutput: 64 << 20}, true,
		"rev-list", "--reverse", "--topo-order", "--parents", input+".."+result)
	if err != nil {
		return "", err
	}
	rewritten := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(list), "\n") {
		ids := strings.Fields(line)
		if len(ids) == 0 || !isObjectID(ids[0]) {
			return "", failure.New(failure.SandboxRuntimeFailed, "git rev-list listed a malformed commit line")
		}
		raw, err := q.run(ctx, RunOpts{Timeout: shortTimeout, MaxOutput: 16 << 20}, true, "cat-file", "commit", ids[0])
		if err != nil {
			return "", err
		}
		c, err := parseCommitObject([]byte(raw))
		if err != nil {
			return "", failure.Wrap(failure.SandboxOutputInvalid, err, "commit %s", ids[0])
		}
		args := []string{"commit-tree", c.tree}
		for _, p := range ids[1:] {
			if r, ok := rewritten[p]; ok {
				p = r
			}
			args = append(args, "-p", p)
		}
		opts := RunOpts{Timeout: shortTimeout, MaxOutput: 256, Stdin: bytes.NewReader(c.message), Env: []string{
			"GIT_AUTHOR_NAME=" + id.Name, "GIT_AUTHOR_EMAIL=" + id.Email, "GIT_AUTHOR_DATE=@" + c.authorDate,
			"GIT_COMMITTER_NAME=" + id.Name, "GIT_COMMITTER_EMAIL=" + id.Email, "GIT_COMMITTER_DATE=@" + c.committerDate,
		}}
		if c.encoding != "" {
			opts.Config = []string{"i18n.commitEncoding=" + c.encoding}
		}
		out, err := q.run(ctx, opts, true, args...)
		if err != nil {
			return "", err
		}
		sha := strings.TrimSpace(out)
		if !isObjectID(sha) {
			return "", failure.New(failure.SandboxRuntimeFailed, "git commit-tree printed no object id")
		}
		rewritten[ids[0]] = sha
	}
	out, ok := rewritten[result]
	if !ok {
		return "", failure.New(failure.SandboxOutputInvalid, "the result %s is not in input..result", result)
	}
	return out, nil
}

// commitObject is what rewriteIdentities keeps of a commit.
type commitObject struct {
	tree                      string
	authorDate, committerDate string // "<seconds> <zone>"
	encoding                  string
	message                   []byte
}

// parseCommitObject reads a raw commit object: its headers up to the first
// empty line, then the message. Continuation lines (a signature's) belong
// to the header before them.
func parseCommitObject(raw []byte) (commitObject, error) {
	var c commitObject
	headers, message, ok := bytes.Cut(raw, []byte("\n\n"))
	if !ok {
		headers, message = bytes.TrimSuffix(raw, []byte("\n")), nil
	}
	c.message = message
	for _, line := range strings.Split(string(headers), "\n") {
		key, value, _ := strings.Cut(line, " ")
		switch key {
		case "tree":
			c.tree = value
		case "author":
			c.authorDate = identityDate(value)
		case "committer":
			c.committerDate = identityDate(value)
		case "encoding":
			c.encoding = value
		}
	}
	switch {
	case !isObjectID(c.tree):
		return c, errMalformedCommit("no tree")
	case c.authorDate == "", c.committerDate == "":
		return c, errMalformedCommit("no author or committer date")
	case strings.ContainsAny(c.encoding, "\n\x00="):
		return c, errMalformedCommit("a malformed encoding")
	}
	return c, nil
}

// identityDate is the "<seconds> <zone>" that ends "Name <email> <seconds>
// <zone>", or "" when the value does not end so.
func identityDate(value string) string {
	i := strings.LastIndex(value, "> ")
	if i < 0 {
		return ""
	}
	date := value[i+2:]
	secs, zone, ok := strings.Cut(date, " ")
	if !ok || secs == "" || strings.Trim(secs, "0123456789") != "" || len(zone) != 5 ||
		(zone[0] != '+' && zone[0] != '-') || strings.Trim(zone[1:], "0123456789") != "" {
		return ""
	}
	return date
}

type errMalformedCommit string

func (e errMalformedCommit) Error() string { return "malformed commit object: " + string(e) }
