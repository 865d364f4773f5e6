package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"

	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"
)

// MaxFileSize bounds a configuration file.
const MaxFileSize = 1 << 20

// File is a parsed configuration file: one YAML mapping of keys to scalars
// or sequences of scalars.
type File struct {
	Path   string
	values map[string]*yaml.Node
	keys   map[string]*yaml.Node // the key nodes, for their lines
}

// LoadFile reads and parses a configuration file strictly: one document,
// a mapping whose keys are all known (known reports whether a key is one),
// no key twice, each value a scalar or a sequence of scalars.
func LoadFile(path string, known func(key string) bool) (*File, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileSize+1))
	if err != nil {
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	if len(data) > MaxFileSize {
		return nil, fmt.Errorf("config: %s: larger than %d bytes", path, MaxFileSize)
	}
	return Parse(path, data, known)
}

// Parse parses a configuration file's content; path only names it in
// errors.
func Parse(path string, data []byte, known func(key string) bool) (*File, error) {
	file := &File{Path: path, values: map[string]*yaml.Node{}, keys: map[string]*yaml.Node{}}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return file, nil // an empty file sets nothing
		}
		return nil, fmt.Errorf("config: %s: %w", path, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("config: %s: one YAML document expected", path)
	}
	if len(doc.Content) == 0 {
		return file, nil
	}
	root := doc.Content[0]
	if root.Kind == yaml.ScalarNode && root.Tag == "!!null" {
		return file, nil
	}
	if root.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("config: %s line %d: a mapping of settings expected", path, root.Line)
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return nil, fmt.Errorf("config: %s line %d: a key must be a string", path, k.Line)
		}
		origin := nodeOrigin(path, k)
		if prev, dup := file.keys[k.Value]; dup {
			return nil, &KeyError{Key: k.Value, Source: SourceFile, Origin: origin, Err: fmt.Errorf("repeated (first at line %d)", prev.Line)}
		}
		if known != nil && !known(k.Value) {
			return nil, &KeyError{Key: k.Value, Source: SourceFile, Origin: origin, Err: errors.New("unknown key")}
		}
		if err := checkShape(v); err != nil {
			return nil, &KeyError{Key: k.Value, Source: SourceFile, Origin: origin, Err: err}
		}
		file.keys[k.Value], file.values[k.Value] = k, v
	}
	return file, nil
}

// Keys returns the file's keys, sorted.
func (f *File) Keys() []string {
	keys := make([]string, 0, len(f.values))
	for k := range f.values {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func checkShape(v *yaml.Node) error {
	switch v.Kind {
	case yaml.ScalarNode:
		if v.Tag == "!!null" {
			return errors.New("no value")
		}
		return nil
	case yaml.SequenceNode:
		for _, item := range v.Content {
			if item.Kind != yaml.ScalarNode || item.Tag == "!!null" {
				return fmt.Errorf("line %d: a list holds plain values only", item.Line)
			}
		}
		return nil
	case yaml.AliasNode:
		return errors.New("aliases are not accepted")
	default:
		return errors.New("a value or a list of values expected")
	}
}

func (f *File) has(key string) bool {
	_, ok := f.values[key]
	return ok
}

// set sets a flag from the file's value for key.
func (f *File) set(flag *pflag.Flag, key string) error {
	v := f.values[key]
	fail := func(err error) error {
		return &KeyError{Key: key, Source: SourceFile, Origin: nodeOrigin(f.Path, f.keys[key]), Err: err}
	}
	sv, isList := flag.Value.(pflag.SliceValue)
	switch {
	case v.Kind == yaml.SequenceNode && isList:
		items := make([]string, 0, len(v.Content))
		for _, item := range v.Content {
			items = append(items, item.Value)
		}
		if err := sv.Replace(items); err != nil {
			return fail(fmt.Errorf("invalid list: %w", err))
		}
	case v.Kind == yaml.SequenceNode:
		return fail(fmt.Errorf("a single %s expected, not a list", flag.Value.Type()))
	case isList:
		if err := sv.Replace([]string{v.Value}); err != nil {
			return fail(fmt.Errorf("invalid value %q: %w", v.Value, err))
		}
	default:
		if err := flag.Value.Set(v.Value); err != nil {
			return fail(fmt.Errorf("invalid value %q: %w", v.Value, err))
		}
	}
	return nil
}
