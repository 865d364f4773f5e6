// Package config layers forged's settings from three sources over a
// command's flag defaults: a YAML file, FORGED_* environment variables and
// the command line, which win in that order (flags, then environment, then
// file).
//
// Nothing is listed by hand: every flag of a command is a setting, so a
// flag added later is configurable at once. A flag named "publish-timeout"
// is the file key "publishTimeout" and the environment variable
// "FORGED_PUBLISH_TIMEOUT". Lists are YAML sequences in the file and
// comma-separated in the environment. An unknown key, a value of the wrong
// shape or one its flag refuses stops the command with an error naming the
// key and where it came from.
package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// Source says where a setting's value came from.
type Source string

// The sources, in increasing precedence.
const (
	SourceDefault Source = "default"
	SourceFile    Source = "file"
	SourceEnv     Source = "env"
	SourceFlag    Source = "flag"
)

// EnvPrefix starts every environment variable forged reads.
const EnvPrefix = "FORGED_"

// Setting is one flag's effective value and its origin.
type Setting struct {
	Key    string   `json:"key"`
	Flag   string   `json:"flag"`
	Env    string   `json:"env"`
	Value  string   `json:"value"`
	Values []string `json:"values,omitempty"`
	Source Source   `json:"source"`
}

// KeyError is a refused setting: the key, where its value came from and why.
type KeyError struct {
	Key    string
	Source Source
	// Origin names the place: the environment variable, or the file and line.
	Origin string
	Err    error
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("config: %s (%s): %v", e.Key, e.Origin, e.Err)
}

func (e *KeyError) Unwrap() error { return e.Err }

// Key is a flag's file key: its name in lowerCamelCase.
func Key(flag string) string {
	var b strings.Builder
	upper := false
	for _, r := range flag {
		if r == '-' || r == '_' {
			upper = true
			continue
		}
		if upper {
			r = unicode.ToUpper(r)
			upper = false
		}
		b.WriteRune(r)
	}
	return b.String()
}

// EnvName is a flag's environment variable.
func EnvName(flag string) string {
	return EnvPrefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Options tune Apply.
type Options struct {
	// File is the parsed configuration file, or nil for none.
	File *File
	// LookupEnv reads the environment (os.LookupEnv); nil reads none.
	LookupEnv func(string) (string, bool)
	// Skip names flags that are never settings (help, the config path
	// itself, output format).
	Skip func(flag string) bool
}

// Apply fills every flag of fs that the command line did not set, from the
// environment or else the file, and returns each flag's setting sorted by
// flag name. It must run once, after the command line is parsed.
func Apply(fs *pflag.FlagSet, opts Options) ([]Setting, error) {
	var settings []Setting
	var errs []error
	fs.VisitAll(func(f *pflag.Flag) {
		if opts.Skip != nil && opts.Skip(f.Name) {
			return
		}
		s := Setting{Key: Key(f.Name), Flag: f.Name, Env: EnvName(f.Name), Source: SourceDefault}
		switch {
		case f.Changed:
			s.Source = SourceFlag
		case opts.LookupEnv != nil && lookup(opts.LookupEnv, s.Env):
			value, _ := opts.LookupEnv(s.Env)
			if err := setEnv(f, value); err != nil {
				errs = append(errs, &KeyError{Key: s.Key, Source: SourceEnv, Origin: "env " + s.Env, Err: err})
				return
			}
			s.Source = SourceEnv
		case opts.File != nil && opts.File.has(s.Key):
			if err := opts.File.set(f, s.Key); err != nil {
				errs = append(errs, err)
				return
			}
			s.Source = SourceFile
		}
		if err := checkMin(f); err != nil {
			errs = append(errs, &KeyError{Key: s.Key, Source: s.Source, Origin: origin(s, opts.File), Err: err})
			return
		}
		s.Value = f.Value.String()
		if sv, ok := f.Value.(pflag.SliceValue); ok {
			s.Values = sv.GetSlice()
			if s.Values == nil {
				s.Values = []string{}
			}
		}
		settings = append(settings, s)
	})
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return settings, nil
}

// AnnotationMin is the flag annotation holding an integer flag's least
// valid value, checked whatever the value's source: SetMin sets it.
const AnnotationMin = "forged.config/min"

// SetMin refuses values of an integer flag below least.
func SetMin(fs *pflag.FlagSet, flag string, least int64) {
	if err := fs.SetAnnotation(flag, AnnotationMin, []string{strconv.FormatInt(least, 10)}); err != nil {
		panic(err) // a programming error: the flag is not defined
	}
}

func checkMin(f *pflag.Flag) error {
	least, ok := f.Annotations[AnnotationMin]
	if !ok || len(least) != 1 {
		return nil
	}
	min, err := strconv.ParseInt(least[0], 10, 64)
	if err != nil {
		return fmt.Errorf("invalid minimum %q", least[0])
	}
	v, err := strconv.ParseInt(f.Value.String(), 10, 64)
	if err != nil {
		return fmt.Errorf("%q is not an integer", f.Value.String())
	}
	if v < min {
		return fmt.Errorf("%d is below the least value, %d", v, min)
	}
	return nil
}

// origin names where a setting's value came from.
func origin(s Setting, file *File) string {
	switch s.Source {
	case SourceFlag:
		return "flag --" + s.Flag
	case SourceEnv:
		return "env " + s.Env
	case SourceFile:
		return nodeOrigin(file.Path, file.keys[s.Key])
	default:
		return "default"
	}
}

func lookup(env func(string) (string, bool), name string) bool {
	_, ok := env(name)
	return ok
}

// setEnv sets a flag from an environment value. A list is comma-separated;
// an empty value sets an empty list.
func setEnv(f *pflag.Flag, value string) error {
	if sv, ok := f.Value.(pflag.SliceValue); ok {
		var items []string
		if value != "" {
			items = strings.Split(value, ",")
		}
		if err := sv.Replace(items); err != nil {
			return fmt.Errorf("invalid value %q: %w", value, err)
		}
		return nil
	}
	if err := f.Value.Set(value); err != nil {
		return fmt.Errorf("invalid value %q: %w", value, err)
	}
	return nil
}

// nodeOrigin names a key's place in the file.
func nodeOrigin(path string, n *yaml.Node) string {
	return fmt.Sprintf("file %s line %d", path, n.Line)
}
