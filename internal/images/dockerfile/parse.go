package dockerfile

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/forgedev/forged/internal/kit/text"
)

// MaxBytes bounds a Dockerfile (gitops bounds the config files the same).
const MaxBytes = 1 << 20

// Instruction is one logical instruction.
type Instruction struct {
	Line  int      // 1-based line of its first physical line
	Cmd   string   // upper case: FROM, RUN, ADD, …
	Flags []string // leading --flags, as written ("--from=build")
	Args  []string // the rest: the JSON array's elements, or whitespace-separated words
	JSON  bool     // Args came from a JSON array (exec form)
	Rest  string   // the text after the flags
}

// File is a parsed Dockerfile.
type File struct {
	Escape       byte
	Syntax       string // the "# syntax=" directive, if any
	SyntaxLine   int
	Instructions []Instruction
}

// ParseError is a Dockerfile that cannot be read.
type ParseError struct {
	Line int
	Msg  string
}

func (e *ParseError) Error() string { return fmt.Sprintf("Dockerfile line %d: %s", e.Line, e.Msg) }

var (
	directive   = regexp.MustCompile(`^#\s*([a-zA-Z][a-zA-Z0-9]*)\s*=\s*(.*?)\s*$`)
	instrName   = regexp.MustCompile(`^[A-Za-z]+$`)
	flagPattern = regexp.MustCompile(`^--[A-Za-z][A-Za-z0-9-]*(=.*)?$`)
)

// Parse reads src. Directives are only recognised before the first
// comment, blank line or instruction, as the builder does.
func Parse(src []byte) (*File, error) {
	if len(src) > MaxBytes {
		return nil, &ParseError{Line: 1, Msg: fmt.Sprintf("the Dockerfile exceeds %d bytes", MaxBytes)}
	}
	text := strings.ReplaceAll(strings.TrimPrefix(string(src), "\ufeff"), "\r\n", "\n")
	lines := strings.Split(text, "\n")
	f := &File{Escape: '\\'}

	i := 0
	for seen := map[string]bool{}; i < len(lines); i++ {
		m := directive.FindStringSubmatch(lines[i])
		if m == nil {
			break
		}
		name := strings.ToLower(m[1])
		if seen[name] {
			return nil, &ParseError{Line: i + 1, Msg: fmt.Sprintf("the %s directive is repeated", name)}
		}
		seen[name] = true
		switch name {
		case "escape":
			if m[2] != "\\" && m[2] != "`" {
				return nil, &ParseError{Line: i + 1, Msg: fmt.Sprintf("invalid escape character %q", m[2])}
			}
			f.Escape = m[2][0]
		case "syntax":
			f.Syntax, f.SyntaxLine = m[2], i+1
		}
	}

	var (
		logical strings.Builder
		start   int
	)
	for ; i < len(lines); i++ {
		line := lines[i]
		trimmed := strings.TrimSpace(line)
		if logical.Len() == 0 {
			if trimmed == "" || strings.HasPrefix(trimmed, "#") {
				continue
			}
			start = i + 1
		} else if strings.HasPrefix(trimmed, "#") || trimmed == "" {
			continue // comments and blank lines inside a continuation are dropped
		}
		body := strings.TrimRight(line, " \t")
		if strings.HasSuffix(body, string(f.Escape)) && !strings.HasSuffix(body, string([]byte{f.Escape, f.Escape})) {
			logical.WriteString(strings.TrimSuffix(body, string(f.Escape)))
			continue
		}
		logical.WriteString(body)
		ins, err := parseInstruction(start, logical.String())
		if err != nil {
			return nil, err
		}
		f.Instructions = append(f.Instructions, ins)
		logical.Reset()
	}
	if logical.Len() > 0 {
		ins, err := parseInstruction(start, logical.String())
		if err != nil {
			return nil, err
		}
		f.Instructions = append(f.Instructions, ins)
	}
	return f, nil
}

func parseInstruction(line int, source string) (Instruction, error) {
	source = strings.TrimSpace(source)
	name, rest, _ := strings.Cut(source, " ")
	if tab := strings.IndexByte(name, '\t'); tab >= 0 {
		name, rest = name[:tab], name[tab+1:]+" "+rest
	}
	if !instrName.MatchString(name) {
		return Instruction{}, &ParseError{Line: line, Msg: fmt.Sprintf("%q is not an instruction", text.Ellipsis(name, 40))}
	}
	ins := Instruction{Line: line, Cmd: strings.ToUpper(name)}
	rest = strings.TrimSpace(rest)
	if ins.Cmd != "RUN" || strings.HasPrefix(rest, "--") {
		for strings.HasPrefix(rest, "--") {
			word, tail, _ := strings.Cut(rest, " ")
			if !flagPattern.MatchString(word) {
				return Instruction{}, &ParseError{Line: line, Msg: fmt.Sprintf("malformed flag %q", text.Ellipsis(word, 40))}
			}
			ins.Flags = append(ins.Flags, word)
			rest = strings.TrimSpace(tail)
		}
	}
	ins.Rest = rest
	if strings.HasPrefix(rest, "[") {
		var arr []string
		if json.Unmarshal([]byte(rest), &arr) == nil {
			ins.Args, ins.JSON = arr, true
			return ins, nil
		}
	}
	ins.Args = strings.Fields(rest)
	return ins, nil
}

// Flag returns the value of --name=value and whether it was given.
func (ins Instruction) Flag(name string) (string, bool) {
	for _, f := range ins.Flags {
		k, v, _ := strings.Cut(strings.TrimPrefix(f, "--"), "=")
		if strings.EqualFold(k, name) {
			return v, true
		}
	}
	return "", false
}
