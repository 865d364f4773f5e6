package dockerfile

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/forgedev/forged/failure"
)

var digest = "sha256:" + strings.Repeat("ab", 32)

func TestPolicyAcceptsPinned(t *testing.T) {
	src := "FROM base@" + digest + " AS build\n" +
		"RUN make\n" +
		"FROM " + digest + "\n" +
		"COPY --from=build /out /out\n" +
		"COPY --from=0 /x /x\n" +
		"FROM scratch\n" +
		"ADD local.tar /\n"
	f, err := CheckSource([]byte(src), true)
	require.NoError(t, err)
	assert.Equal(t, []Image{{Ref: "base@" + digest, Line: 1}, {Ref: digest, Line: 3}}, f.UpstreamImages())
}

func TestPolicyViolations(t *testing.T) {
	cases := []struct {
		name, src       string
		sandboxRequired bool
		want            string
	}{
		{"unpinned FROM", "FROM scratch\nRUN x\nFROM debian:bookworm\n", true, "line 3: the image \"debian:bookworm\" is not pinned by digest"},
		{"tag only", "FROM debian@sha256:short\n", true, "line 1: the image"},
		{"argument", "ARG BASE=x@" + digest + "\nFROM $BASE\n", true, "line 2: the image \"$BASE\" depends on a build argument"},
		{"COPY from an image", "FROM scratch\nCOPY --from=alpine:3 /a /a\n", true, "line 2: the image \"alpine:3\" is not pinned"},
		{"syntax directive", "# syntax=docker/dockerfile:1\nFROM scratch\n", true, "line 1: the syntax directive"},
		{"ADD URL", "FROM scratch\n\nADD https://example.com/x.tgz /x\n", false, "line 3: ADD fetches \"https://example.com/x.tgz\""},
		{"ADD URL exec form", "FROM scratch\nADD [\"http://e/x\", \"/x\"]\n", false, "line 2: ADD fetches"},
		{"ADD git", "FROM scratch\nADD git@github.com:o/r.git /r\n", false, "line 2: ADD fetches"},
		{"ADD variable", "FROM scratch\nARG U=http://e/x\nADD $U /x\n", false, "line 3: ADD source \"$U\" depends on a variable"},
		{"ONBUILD ADD", "FROM scratch\nONBUILD ADD http://e/x /x\n", false, "line 2: ADD fetches"},
		{"continued ADD", "FROM scratch\nADD \\\n  https://e/x \\\n  /x\n", false, "line 2: ADD fetches"},
		{"empty", "# nothing\n", false, "no instructions"},
	}
	for _, c := range cases {
		_, err := CheckSource([]byte(c.src), c.sandboxRequired)
		require.Error(t, err, c.name)
		assert.Equal(t, failure.SandboxBuildPolicy, failure.CodeOf(err), c.name)
		assert.Contains(t, err.Error(), c.want, c.name)
	}
}

func TestPolicyAdoptionAllowsTags(t *testing.T) {
	_, err := CheckSource([]byte("FROM debian:bookworm\nFROM $X\nCOPY --from=img /a /a\n"), false)
	assert.NoError(t, err)
}

func TestPolicyListsEveryViolationBounded(t *testing.T) {
	src := strings.Repeat("FROM img:latest\n", 15)
	_, err := CheckSource([]byte(src), true)
	require.Error(t, err)
	assert.Equal(t, 10, strings.Count(err.Error(), "is not pinned"))
	assert.Contains(t, err.Error(), "and 5 more")
	assert.NotContains(t, err.Error(), "\n")
}
