package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/views"
)

// `aosd trace WORKFLOW KEY` as text tells a cell's story: each step with
// the input it took and the state diff it made (the inspector's JSON Patch,
// views.Timelines), each intent with a one-line summary of what it asks
// (HTTP method and URL, a timer's due time) and its issuer ref, each
// attempt and receipt (the HTTP status, attempts counted across restarts),
// and the records no timeline entry shows: moves onto a new manifest.

// traceLine is one record of the story: a timeline entry, or a move.
type traceLine struct {
	views.TimelineEntry
	issuerRef string          // an intent's, from its journal record
	move      *views.MoveBody // a move's record
}

// kindMove is a move record's kind as the trace shows it.
const kindMove = journal.Kind("move")

// maxDiffLines bounds the state diff lines shown for one step.
const maxDiffLines = 12

// cellStory reads the cell's timeline, page by page, and the journal's
// intents (for their issuer refs) and moves of the cell.
func cellStory(ctx context.Context, c *host.Conn, workflow, key string, keyed bool) ([]traceLine, error) {
	var lines []traceLine
	q := views.TimelineQuery{Limit: views.MaxTimelinePage}
	for {
		page, err := c.Timeline(ctx, workflow, key, q)
		if err != nil {
			return nil, err
		}
		for _, e := range page.Entries {
			lines = append(lines, traceLine{TimelineEntry: e})
		}
		if page.Next == nil || len(page.Entries) == 0 {
			break
		}
		q.After = *page.Next
	}
	refs := map[string]string{}
	want := []byte(cellKeyJSON(key, keyed))
	err := c.Journal(ctx, api.JournalQuery{Kinds: []string{string(journal.KindIntent), string(kindMove)}}, func(raw json.RawMessage) error {
		var r struct {
			Seq  uint64          `json:"seq"`
			Kind string          `json:"kind"`
			Body json.RawMessage `json:"body"`
		}
		if err := json.Unmarshal(raw, &r); err != nil {
			return err
		}
		switch r.Kind {
		case string(journal.KindIntent):
			var b views.IntentBody
			if err := json.Unmarshal(r.Body, &b); err != nil {
				return err
			}
			if b.IssuerRef != "" && b.OriginWorkflow == workflow {
				refs[b.Hash.String()] = b.IssuerRef
			}
		case string(kindMove):
			var b views.MoveBody
			if err := json.Unmarshal(r.Body, &b); err != nil {
				return err
			}
			if b.Workflow == workflow && sameJSON(b.Key, want) {
				l := traceLine{move: &b}
				l.Seq, l.Kind = r.Seq, kindMove
				lines = append(lines, l)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i := range lines {
		if l := &lines[i]; l.Kind == journal.KindIntent && len(l.Intents) > 0 {
			l.issuerRef = refs[l.Intents[0].String()]
		}
	}
	slices.SortStableFunc(lines, func(a, b traceLine) int { return int64Cmp(a.Seq, b.Seq) })
	return lines, nil
}

func int64Cmp(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// cellKeyJSON is the key as the API reads what the user typed: JSON when
// it parses (compacted), else that text as a JSON string; null unkeyed.
func cellKeyJSON(key string, keyed bool) string {
	if !keyed {
		return "null"
	}
	var buf bytes.Buffer
	if json.Valid([]byte(key)) && json.Compact(&buf, []byte(key)) == nil {
		return buf.String()
	}
	b, _ := json.Marshal(key)
	return string(b)
}

func sameJSON(a, b []byte) bool {
	var x, y bytes.Buffer
	return json.Compact(&x, a) == nil && json.Compact(&y, b) == nil && bytes.Equal(x.Bytes(), y.Bytes())
}

// traceStory is what rendering one line needs to know of the others: the
// inputs steps name, and each intent's effect and issuer ref.
type traceStory struct {
	bySeq   map[uint64]*traceLine
	intents map[string]*traceLine // intent records by hash
}

func newTraceStory(lines []traceLine) *traceStory {
	s := &traceStory{bySeq: map[uint64]*traceLine{}, intents: map[string]*traceLine{}}
	for i := range lines {
		l := &lines[i]
		s.bySeq[l.Seq] = l
		if l.Kind == journal.KindIntent && len(l.Intents) > 0 {
			s.intents[l.Intents[0].String()] = l
		}
	}
	return s
}

// detail is a line's text: its first line, then continuation lines.
func (s *traceStory) detail(l traceLine) []string {
	e := l.TraceEntry
	switch l.Kind {
	case journal.KindEvent:
		return []string{fmt.Sprintf("%s %s", e.Schema, compact(e.Value, 100))}
	case journal.KindStep:
		return s.stepDetail(l)
	case journal.KindIntent:
		return []string{s.intentDetail(l)}
	case journal.KindFault:
		return []string{fmt.Sprintf("%s failed: %s", s.inputName(e.Input), e.Reason)}
	case journal.KindRecover:
		return []string{fmt.Sprintf("%s of fault %d (input %d, %s)", e.Action, e.Fault, e.Input, recoverCounts(e.Skipped, e.Parked, e.Dropped))}
	case journal.KindReceipt, journal.KindDrop:
		return []string{s.receiptDetail(e)}
	case journal.KindFrame:
		return []string{s.frameDetail(e)}
	case journal.KindCancel:
		d := e.Effect
		if len(e.Intents) > 0 {
			d += " " + e.Intents[0].String() + s.refOf(e.Intents[0].String())
		}
		d += " cancelled by " + e.By
		if e.Reason != "" {
			d += ": " + e.Reason
		}
		return []string{d + "; no receipt will come, the workflow gets sys/EffectCancelled@1"}
	case kindMove:
		m := l.move
		d := fmt.Sprintf("moved from manifest %s to %s after replaying %d input(s) since %s", m.From, m.To, len(m.Inputs), m.Since)
		if m.StateHash != nil {
			d += ", state " + m.StateHash.String()
		}
		return []string{d}
	}
	b, _ := json.Marshal(e)
	return []string{string(b)}
}

// inputName says what a step's input was: "event 3
// (com.example/ReminderSet@1)", "receipt 6 (sys/timer.set@1 ok)".
func (s *traceStory) inputName(seq uint64) string {
	in := s.bySeq[seq]
	if in == nil {
		return fmt.Sprintf("input %d", seq)
	}
	switch in.Kind {
	case journal.KindEvent:
		return fmt.Sprintf("event %d (%s)", seq, in.Schema)
	case journal.KindReceipt:
		return fmt.Sprintf("receipt %d (%s %s%s)", seq, in.Effect, in.Status, s.refOfEntry(in.TraceEntry))
	case journal.KindFrame:
		return fmt.Sprintf("frame %d", seq)
	case journal.KindCancel:
		return fmt.Sprintf("cancel %d (%s)", seq, in.Effect)
	}
	return fmt.Sprintf("%s %d", in.Kind, seq)
}

func (s *traceStory) stepDetail(l traceLine) []string {
	e := l.TraceEntry
	first := s.inputName(e.Input) + " -> "
	if e.Deleted || e.StateHash == nil {
		first += "cell deleted"
	} else {
		first += "state " + e.StateHash.String()
	}
	if len(e.Emitted) > 0 {
		first += fmt.Sprintf(", emitted events %v", e.Emitted)
	}
	if len(e.Intents) > 0 {
		first += fmt.Sprintf(", %d intent(s)", len(e.Intents))
	}
	out := []string{first}
	switch {
	case l.Diff == nil && l.StateReason != "":
		out = append(out, "  state change not known: "+l.StateReason)
	case l.Diff == nil:
	default:
		out = append(out, diffLines(l.Diff)...)
	}
	return out
}

// diffLines renders a JSON Patch one operation a line: "+ /path value"
// (added), "~ /path value" (replaced), "- /path" (removed).
func diffLines(patch json.RawMessage) []string {
	var ops []struct {
		Op    string          `json:"op"`
		Path  string          `json:"path"`
		From  string          `json:"from"`
		Value json.RawMessage `json:"value"`
	}
	if err := json.Unmarshal(patch, &ops); err != nil {
		return []string{"  state diff: " + compact(patch, 100)}
	}
	if len(ops) == 0 {
		return []string{"  state unchanged"}
	}
	// A new (or wholly replaced) object state reads better field by field.
	if len(ops) == 1 && ops[0].Path == "" && (ops[0].Op == "add" || ops[0].Op == "replace") {
		var fields map[string]json.RawMessage
		if json.Unmarshal(ops[0].Value, &fields) == nil && len(fields) > 0 {
			sign := map[string]string{"add": "+", "replace": "~"}[ops[0].Op]
			out := []string{}
			for i, k := range slices.Sorted(maps.Keys(fields)) {
				if i == maxDiffLines {
					out = append(out, fmt.Sprintf("  … %d more field(s): aosd cells show, or the inspector", len(fields)-i))
					break
				}
				out = append(out, fmt.Sprintf("  %s /%s %s", sign, pointerToken(k), compact(fields[k], 80)))
			}
			return out
		}
	}
	var out []string
	for i, op := range ops {
		if i == maxDiffLines {
			out = append(out, fmt.Sprintf("  … %d more change(s): aosd cells show, or the inspector", len(ops)-i))
			break
		}
		path := op.Path
		if path == "" {
			path = "/"
		}
		switch op.Op {
		case "add":
			out = append(out, fmt.Sprintf("  + %s %s", path, compact(op.Value, 80)))
		case "replace":
			out = append(out, fmt.Sprintf("  ~ %s %s", path, compact(op.Value, 80)))
		case "remove":
			out = append(out, "  - "+path)
		default:
			out = append(out, fmt.Sprintf("  %s %s %s %s", op.Op, op.From, path, compact(op.Value, 80)))
		}
	}
	return out
}

func (s *traceStory) refOf(hash string) string {
	if in := s.intents[hash]; in != nil && in.issuerRef != "" {
		return fmt.Sprintf(" (ref %q)", in.issuerRef)
	}
	return ""
}

func (s *traceStory) refOfEntry(e views.TraceEntry) string {
	if len(e.Intents) == 0 {
		return ""
	}
	return s.refOf(e.Intents[0].String())
}

// intentDetail summarises what an intent asks: an HTTP call's method and
// URL, a timer's due time; any other effect by its name.
func (s *traceStory) intentDetail(l traceLine) string {
	e := l.TraceEntry
	var p map[string]json.RawMessage
	_ = json.Unmarshal(e.Value, &p)
	what := e.Effect
	switch {
	case strings.HasPrefix(e.Effect, "sys/http.request@"):
		what += " " + jsonText(p["method"]) + " " + jsonText(p["url"])
	case e.Effect == "sys/timer.set@1":
		var at uint64
		if json.Unmarshal(p["deliver_at_ns"], &at) == nil {
			what += " due " + nsTime(at)
		}
	}
	if l.issuerRef != "" {
		what += fmt.Sprintf(" (ref %q)", l.issuerRef)
	}
	h := ""
	if len(e.Intents) > 0 {
		h = e.Intents[0].String()
	}
	return fmt.Sprintf("%s: %s, opened by step %d", what, h, e.Input)
}

// receiptDetail says what came back: the HTTP status, when a timer fired,
// the error of a failed effect, and the attempt (counted across restarts).
func (s *traceStory) receiptDetail(e views.TraceEntry) string {
	d := fmt.Sprintf("%s %s", e.Effect, e.Status)
	var p map[string]json.RawMessage
	_ = json.Unmarshal(e.Value, &p)
	switch {
	case e.Kind == journal.KindDrop:
	case e.Status == "ok" && strings.HasPrefix(e.Effect, "sys/http.request@"):
		d += ": HTTP " + jsonText(p["status"])
	case e.Status == "ok" && e.Effect == "sys/timer.set@1":
		var at uint64
		if json.Unmarshal(p["delivered_at_ns"], &at) == nil {
			d += ": fired " + nsTime(at)
		}
	case e.Status != "ok" && p["error"] != nil:
		d += ": " + compactText(jsonText(p["error"]), 120)
	}
	if e.Attempt > 0 {
		d += fmt.Sprintf(", attempt %d", e.Attempt)
	}
	d += " from " + e.Executor
	if len(e.Intents) > 0 {
		d += s.refOf(e.Intents[0].String()) + " for " + e.Intents[0].String()
	}
	if e.Reason != "" {
		d += ": " + e.Reason
	}
	return d
}

// frameDetail reads the built-in executors' attempt frames: typed HTTP's
// {attempt, last_error?, waited_ms?, resumed?} before each attempt, the
// other built-ins' {attempt, error, retry_in_ms} after a failed one; any
// other frame is shown as its payload.
func (s *traceStory) frameDetail(e views.TraceEntry) string {
	h, effect := "", ""
	if len(e.Intents) > 0 {
		h = e.Intents[0].String()
		if in := s.intents[h]; in != nil {
			effect = in.Effect + s.refOf(h) + " "
		}
	}
	var f struct {
		Attempt   uint64 `json:"attempt"`
		LastError string `json:"last_error"`
		WaitedMs  *int64 `json:"waited_ms"`
		Resumed   bool   `json:"resumed"`
		Error     string `json:"error"`
		RetryInMs *int64 `json:"retry_in_ms"`
	}
	if e.Executor == "aos/builtin" && json.Unmarshal(e.Value, &f) == nil && f.Attempt > 0 {
		switch {
		case f.Error != "" && f.RetryInMs != nil:
			return fmt.Sprintf("%sattempt %d failed: %s; retrying in %d ms", effect, f.Attempt, compactText(f.Error, 100), *f.RetryInMs)
		case f.Resumed:
			return fmt.Sprintf("%sattempt %d sent (again after a restart: attempt %d may have reached the server)", effect, f.Attempt, f.Attempt-1)
		case f.LastError != "" && f.WaitedMs != nil:
			return fmt.Sprintf("%sattempt %d sent after %d ms (attempt %d: %s)", effect, f.Attempt, *f.WaitedMs, f.Attempt-1, compactText(f.LastError, 100))
		default:
			return fmt.Sprintf("%sattempt %d sent", effect, f.Attempt)
		}
	}
	return fmt.Sprintf("frame %d from %s: %s", e.FrameSeq, e.Executor, compact(e.Value, 100))
}

// jsonText is a JSON string's text, or the JSON itself for another value.
func jsonText(v json.RawMessage) string {
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s
	}
	return string(v)
}

// nsTime shows Unix nanoseconds as UTC time to the millisecond.
func nsTime(ns uint64) string {
	return time.Unix(0, int64(ns)).UTC().Format("2006-01-02 15:04:05.000Z")
}

// pointerToken escapes a key as a JSON Pointer token (RFC 6901).
func pointerToken(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
