package dockerfile

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/forgedev/forged/failure"
	"github.com/forgedev/forged/internal/kit/text"
)

// Image is an upstream image the Dockerfile names.
type Image struct {
	Ref  string
	Line int
}

var (
	pinnedRef = regexp.MustCompile(`^(?:[^\s@$]+@)?sha256:[0-9a-f]{64}$`)
	urlSource = regexp.MustCompile(`(?i)^(?:[a-z][a-z0-9+.-]*://|git@)`)
)

// Pinned reports whether ref names an image by content: name@sha256:<hex>
// or an image id, sha256:<hex>.
func Pinned(ref string) bool { return pinnedRef.MatchString(ref) }

// UpstreamImages lists the images the build starts from: every FROM that
// is neither scratch nor an earlier stage, and every COPY --from that is
// not a stage, in order.
func (f *File) UpstreamImages() []Image {
	var out []Image
	var stages []string
	isStage := func(ref string) bool {
		if n, err := strconv.Atoi(ref); err == nil {
			return n >= 0 && n < len(stages)
		}
		for _, s := range stages {
			if strings.EqualFold(s, ref) {
				return true
			}
		}
		return false
	}
	for _, ins := range f.Instructions {
		switch ins.Cmd {
		case "FROM":
			if len(ins.Args) == 0 {
				continue
			}
			ref := ins.Args[0]
			if !strings.EqualFold(ref, "scratch") && !isStage(ref) {
				out = append(out, Image{Ref: ref, Line: ins.Line})
			}
			name := ""
			if len(ins.Args) >= 3 && strings.EqualFold(ins.Args[1], "AS") {
				name = ins.Args[2]
			}
			stages = append(stages, name)
		case "COPY":
			if from, ok := ins.Flag("from"); ok && from != "" && !isStage(from) {
				out = append(out, Image{Ref: from, Line: ins.Line})
			}
		}
	}
	return out
}

// Check applies the build policy to f. Every violation is listed, each
// naming its line; the error is failure.SandboxBuildPolicy.
func (f *File) Check(sandboxRequired bool) error {
	var msgs []string
	violation := func(line int, format string, args ...any) {
		msgs = append(msgs, fmt.Sprintf("Dockerfile line %d: ", line)+fmt.Sprintf(format, args...))
	}
	if len(f.Instructions) == 0 {
		violation(1, "no instructions")
	}
	if sandboxRequired && f.Syntax != "" {
		violation(f.SyntaxLine, "the syntax directive %q names a frontend image from a registry", text.Ellipsis(f.Syntax, 80))
	}
	for _, ins := range f.Instructions {
		checkAdd(ins, ins.Line, violation)
		if ins.Cmd == "ONBUILD" {
			inner, err := parseInstruction(ins.Line, ins.Rest)
			if err != nil {
				violation(ins.Line, "ONBUILD: %s", err.(*ParseError).Msg)
				continue
			}
			checkAdd(inner, ins.Line, violation)
			if sandboxRequired {
				if from, ok := inner.Flag("from"); ok {
					violation(ins.Line, "ONBUILD COPY --from=%s copies from an image the policy cannot check", text.Ellipsis(from, 80))
				}
			}
		}
		if ins.Cmd == "FROM" && len(ins.Args) == 0 {
			violation(ins.Line, "FROM names no image")
		}
		if from, ok := ins.Flag("from"); ok && from == "" {
			violation(ins.Line, "%s --from names no stage or image", ins.Cmd)
		}
	}
	if sandboxRequired {
		for _, img := range f.UpstreamImages() {
			switch {
			case strings.Contains(img.Ref, "$"):
				violation(img.Line, "the image %q depends on a build argument; sandbox_required needs a literal image pinned by digest", text.Ellipsis(img.Ref, 120))
			case !Pinned(img.Ref):
				violation(img.Line, "the image %q is not pinned by digest (name@sha256:<digest>); sandbox_required builds never pull", text.Ellipsis(img.Ref, 120))
			}
		}
	}
	if len(msgs) == 0 {
		return nil
	}
	if len(msgs) > maxViolations {
		msgs = append(msgs[:maxViolations], fmt.Sprintf("and %d more", len(msgs)-maxViolations))
	}
	return failure.New(failure.SandboxBuildPolicy, "%s", strings.Join(msgs, "; "))
}

// maxViolations bounds the violations one error lists.
const maxViolations = 10

func checkAdd(ins Instruction, line int, violation func(int, string, ...any)) {
	if ins.Cmd != "ADD" || len(ins.Args) < 2 {
		return
	}
	for _, src := range ins.Args[:len(ins.Args)-1] {
		switch {
		case urlSource.MatchString(src):
			violation(line, "ADD fetches %q from the network; copy the file into the repository instead", text.Ellipsis(src, 120))
		case strings.Contains(src, "$"):
			violation(line, "ADD source %q depends on a variable, which may name a URL; use COPY", text.Ellipsis(src, 120))
		}
	}
}

// CheckSource parses src and applies the policy. A Dockerfile that cannot
// be read is failure.SandboxBuildPolicy as well.
func CheckSource(src []byte, sandboxRequired bool) (*File, error) {
	f, err := Parse(src)
	if err != nil {
		return nil, failure.Wrap(failure.SandboxBuildPolicy, err, "%v", err)
	}
	if err := f.Check(sandboxRequired); err != nil {
		return nil, err
	}
	return f, nil
}
