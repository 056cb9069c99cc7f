package build

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// wasmDef is a wasm defmodule as one JSON file declares it, with the byte
// offsets needed to rewrite its hash in place.
type wasmDef struct {
	file     string // the JSON file that declares it
	name     string
	artifact string
	source   string // "" when the def names no source
	hash     string // as declared ("" when absent)
	// hashAt is the span of the hash string literal, quotes included;
	// hashAt[0] < 0 when the def has no "hash".
	hashAt [2]int
	// artifactEnd is the offset just past the artifact string literal: a
	// missing hash is inserted there.
	artifactEnd int
}

// manifestFiles lists the JSON files of path as manifest.Load reads them: the
// file itself, or a directory's *.json files in name order.
func manifestFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	ents, err := os.ReadDir(path)
	if err != nil {
		return nil, fmt.Errorf("manifest %s: %w", path, err)
	}
	var files []string
	for _, e := range ents {
		if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
			files = append(files, filepath.Join(path, e.Name()))
		}
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("manifest %s: no *.json files in the directory", path)
	}
	return files, nil
}

// scanFile finds the wasm defmodules in one manifest file (a def object or
// an array of them). It reads only what it needs; anything else about the
// file is left for manifest.Load to judge.
func scanFile(file string, data []byte) ([]wasmDef, error) {
	s := &scanner{file: file, data: data, dec: json.NewDecoder(bytes.NewReader(data))}
	s.dec.UseNumber()
	defs, err := s.top()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return defs, nil
}

type scanner struct {
	file string
	data []byte
	dec  *json.Decoder
}

func (s *scanner) top() ([]wasmDef, error) {
	tok, err := s.dec.Token()
	if err != nil {
		return nil, fmt.Errorf("not valid JSON: %w", err)
	}
	var out []wasmDef
	switch tok {
	case json.Delim('{'):
		d, err := s.def(0)
		if err != nil {
			return nil, err
		}
		if d != nil {
			out = append(out, *d)
		}
	case json.Delim('['):
		for i := 0; s.dec.More(); i++ {
			tok, err := s.dec.Token()
			if err != nil {
				return nil, fmt.Errorf("not valid JSON: %w", err)
			}
			if tok != json.Delim('{') {
				return nil, fmt.Errorf("element %d is not a def object", i)
			}
			d, err := s.def(i)
			if err != nil {
				return nil, err
			}
			if d != nil {
				out = append(out, *d)
			}
		}
		if _, err := s.dec.Token(); err != nil {
			return nil, fmt.Errorf("not valid JSON: %w", err)
		}
	default:
		return nil, errors.New("must hold a def object or an array of defs")
	}
	if _, err := s.dec.Token(); err != io.EOF {
		return nil, errors.New("not valid JSON: data after the top-level value")
	}
	return out, nil
}

// str reads a string value and the span of its literal in the file. The
// decoder's offset before the value is the end of the key; the literal
// starts after the colon and any spaces.
func (s *scanner) str(what string) (string, [2]int, error) {
	start := s.dec.InputOffset()
	tok, err := s.dec.Token()
	if err != nil {
		return "", [2]int{}, fmt.Errorf("not valid JSON: %w", err)
	}
	v, ok := tok.(string)
	if !ok {
		if d, isDelim := tok.(json.Delim); isDelim {
			s.skipRest(d)
		}
		return "", [2]int{}, fmt.Errorf("%s must be a string, found %v", what, tok)
	}
	i := int(start)
	for i < len(s.data) && (s.data[i] == ':' || s.data[i] == ' ' || s.data[i] == '\t' || s.data[i] == '\n' || s.data[i] == '\r') {
		i++
	}
	end := int(s.dec.InputOffset())
	if i >= end || s.data[i] != '"' || s.data[end-1] != '"' {
		return "", [2]int{}, fmt.Errorf("%s: cannot locate the string in the file", what)
	}
	return v, [2]int{i, end}, nil
}

// skip reads and discards one value.
func (s *scanner) skip() error {
	var raw json.RawMessage
	if err := s.dec.Decode(&raw); err != nil {
		return fmt.Errorf("not valid JSON: %w", err)
	}
	return nil
}

// skipRest discards the rest of a composite value whose opening delimiter
// was just read.
func (s *scanner) skipRest(open json.Delim) {
	for depth := 1; depth > 0; {
		tok, err := s.dec.Token()
		if err != nil {
			return
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
}

// keys calls fn for each key of the object whose '{' was just read; fn must
// consume the value. Duplicate keys are refused.
func (s *scanner) keys(where string, fn func(key string) error) error {
	seen := map[string]bool{}
	for s.dec.More() {
		tok, err := s.dec.Token()
		if err != nil {
			return fmt.Errorf("not valid JSON: %w", err)
		}
		k := tok.(string) // object keys are always strings
		if seen[k] {
			return fmt.Errorf("%s: duplicate key %q", where, k)
		}
		seen[k] = true
		if err := fn(k); err != nil {
			return err
		}
	}
	if _, err := s.dec.Token(); err != nil { // '}'
		return fmt.Errorf("not valid JSON: %w", err)
	}
	return nil
}

type runtimeFields struct {
	kind, artifact, source, hash string
	hashAt                       [2]int
	artifactEnd                  int
	hasHash                      bool
}

// def reads the def object whose '{' was just read and returns it when it
// is a wasm defmodule.
func (s *scanner) def(index int) (*wasmDef, error) {
	var kind, name string
	var rt *runtimeFields
	where := fmt.Sprintf("def %d", index)
	err := s.keys(where, func(k string) error {
		var err error
		switch k {
		case "$kind":
			kind, _, err = s.str(where + ` "$kind"`)
		case "name":
			name, _, err = s.str(where + ` "name"`)
		case "runtime":
			tok, terr := s.dec.Token()
			if terr != nil {
				return fmt.Errorf("not valid JSON: %w", terr)
			}
			if tok != json.Delim('{') {
				// Not a runtime this scan understands; manifest.Load
				// will say what is wrong with it.
				if d, ok := tok.(json.Delim); ok {
					s.skipRest(d)
				}
				return nil
			}
			rt, err = s.runtime()
		default:
			err = s.skip()
		}
		return err
	})
	if err != nil {
		if name != "" {
			err = fmt.Errorf("def %s: %w", name, err)
		}
		return nil, err
	}
	if kind != "defmodule" || rt == nil || rt.kind != "wasm" {
		return nil, nil
	}
	label := name
	if label == "" {
		label = where
	}
	if rt.artifact == "" {
		return nil, fmt.Errorf(`def %s: a wasm runtime needs "artifact" (the module file, relative to this file)`, label)
	}
	d := &wasmDef{file: s.file, name: label, artifact: rt.artifact, source: rt.source, hash: rt.hash,
		hashAt: [2]int{-1, -1}, artifactEnd: rt.artifactEnd}
	if rt.hasHash {
		d.hashAt = rt.hashAt
	}
	return d, nil
}

func (s *scanner) runtime() (*runtimeFields, error) {
	rt := &runtimeFields{}
	err := s.keys(`"runtime"`, func(k string) error {
		var err error
		var at [2]int
		switch k {
		case "kind":
			rt.kind, _, err = s.str(`runtime "kind"`)
		case "artifact":
			rt.artifact, at, err = s.str(`runtime "artifact"`)
			rt.artifactEnd = at[1]
		case "source":
			rt.source, _, err = s.str(`runtime "source"`)
		case "hash":
			rt.hash, rt.hashAt, err = s.str(`runtime "hash"`)
			rt.hasHash = true
		default:
			err = s.skip()
		}
		return err
	})
	return rt, err
}

// edit is one change to a file: replace data[from:to] with text.
type edit struct {
	from, to int
	text     string
}

// setHash returns the edit that makes d's hash h.
func (d *wasmDef) setHash(h string) edit {
	lit, _ := json.Marshal(h)
	if d.hashAt[0] < 0 {
		return edit{d.artifactEnd, d.artifactEnd, `, "hash": ` + string(lit)}
	}
	return edit{d.hashAt[0], d.hashAt[1], string(lit)}
}

// applyEdits applies non-overlapping edits to data.
func applyEdits(data []byte, edits []edit) []byte {
	out := make([]byte, 0, len(data)+len(edits)*80)
	at := 0
	for _, e := range sortedEdits(edits) {
		out = append(out, data[at:e.from]...)
		out = append(out, e.text...)
		at = e.to
	}
	return append(out, data[at:]...)
}

func sortedEdits(edits []edit) []edit {
	out := append([]edit(nil), edits...)
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out
}
