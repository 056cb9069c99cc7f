package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
)

// table prints aligned columns.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer) *table { return &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)} }

func (t *table) row(cells ...any) {
	for i, c := range cells {
		if i > 0 {
			fmt.Fprint(t.tw, "\t")
		}
		fmt.Fprint(t.tw, c)
	}
	fmt.Fprintln(t.tw)
}

func (t *table) flush() error { return t.tw.Flush() }

// compact renders JSON on one line, cut to max runes.
func compact(js json.RawMessage, max int) string {
	var b bytes.Buffer
	if json.Compact(&b, js) != nil {
		b.Reset()
		b.Write(js)
	}
	s := []rune(b.String())
	if len(s) > max {
		return string(s[:max-1]) + "…"
	}
	return string(s)
}

func indentJSON(js json.RawMessage) string {
	var b bytes.Buffer
	if json.Indent(&b, js, "", "  ") != nil {
		return string(js)
	}
	return b.String()
}
