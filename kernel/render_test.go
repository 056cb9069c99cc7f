package kernel_test

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// The scenario files' renderings of journal records and trace entries,
// written from the typed records. They reproduce the JSON the daemon's
// shapes (daemon.Describe, daemon.TraceEntry) gave through encoding/json,
// which the kernel's tests do not import: object keys sorted or in field
// order, <, > and & escaped in strings, empty fields left out.

// journalLines renders records after `from` compactly for scenario files.
func (h *harness) journalLines(from uint64) string {
	var sb strings.Builder
	err := h.w.Journal().Read(from, func(r journal.Record) (bool, error) {
		line, err := compactRecord(r)
		if err != nil {
			return false, err
		}
		sb.WriteString(line)
		sb.WriteByte('\n')
		return true, nil
	})
	if err != nil {
		h.t.Fatal(err)
	}
	return sb.String()
}

// compactRecord is "seq kind name=json ..." with the record's fields in
// name order, leaving out nulls, empty arrays and the fields people do not
// read in a scenario (stamps, hashes of the record itself, limits).
func compactRecord(r journal.Record) (string, error) {
	rec, err := records.Decode(r)
	if err != nil {
		return "", err
	}
	f := map[string]string{}
	switch rec := rec.(type) {
	case *records.EventRec:
		targets := make([]string, len(rec.Targets))
		for i, t := range rec.Targets {
			targets[i] = object(map[string]string{"key": keyJSON(t.Key), "workflow": jsonString(t.Workflow)})
		}
		f["schema"], f["value"], f["targets"] = jsonString(rec.Schema), valueJSON(rec.Value), "["+strings.Join(targets, ",")+"]"
		if o := rec.Origin; o != nil {
			f["origin"] = object(map[string]string{"key": keyJSON(o.Key), "step": uintJSON(o.Step), "workflow": jsonString(o.Workflow)})
		}
		if rec.IdempotencyKey != "" {
			f["idempotency_key"] = jsonString(rec.IdempotencyKey)
		}
	case *records.StepRec:
		f["input"], f["workflow"], f["key"] = uintJSON(rec.Input), jsonString(rec.Workflow), keyJSON(rec.Key)
		f["state_hash"], f["emitted"], f["intents"] = hashJSON(rec.StateHash), uintsJSON(rec.Emitted), hashesJSON(rec.Intents)
	case *records.FaultRec:
		f["input"], f["workflow"], f["key"], f["reason"] = uintJSON(rec.Input), jsonString(rec.Workflow), keyJSON(rec.Key), jsonString(rec.Reason)
		if rec.Class != "" {
			f["class"] = jsonString(rec.Class)
		}
	case *records.IntentRec:
		f["origin_workflow"], f["origin_key"], f["effect"] = jsonString(rec.OriginWorkflow), keyJSON(rec.OriginKey), jsonString(rec.Effect)
		f["params"], f["emitted_at"], f["index"] = valueJSON(rec.Params), uintJSON(rec.EmittedAt), uintJSON(rec.Index)
	case *records.ManifestRec:
		f["name"] = jsonString(rec.Name)
	case *records.ConfigRec:
	case *records.WorldRec:
		f["id"] = jsonString(rec.ID)
	case *records.RecoverRec:
		f["workflow"], f["key"], f["action"] = jsonString(rec.Workflow), keyJSON(rec.Key), jsonString(rec.Action)
		f["fault"], f["input"], f["skipped"] = uintJSON(rec.Fault), uintJSON(rec.Input), uintJSON(rec.Skipped)
	case *records.ReceiptRec, *records.DropRec, *records.FrameRec:
		e, _ := records.Entry(r.Seq, r.Kind, rec)
		f["intent"], f["executor"] = jsonString(e.Intents[0].String()), jsonString(e.Executor)
		for name, v := range map[string]string{"effect": e.Effect, "status": e.Status, "reason": e.Reason} {
			if v != "" {
				f[name] = jsonString(v)
			}
		}
		if e.Attempt != 0 {
			f["attempt"] = uintJSON(e.Attempt)
		}
		if e.FrameSeq != 0 {
			f["frame_seq"] = uintJSON(e.FrameSeq)
		}
		if v := valueJSON(e.Value); v != "null" {
			f["payload"] = v
		}
	default:
		return "", fmt.Errorf("seq %d: no scenario rendering for %s records", r.Seq, r.Kind)
	}
	parts := []string{fmt.Sprintf("%d %s", r.Seq, r.Kind)}
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if v := f[k]; v != "null" && v != "[]" {
			parts = append(parts, k+"="+shortHashes(v))
		}
	}
	return strings.Join(parts, " "), nil
}

// traceLine is a trace entry as the daemon's TraceEntry JSON, in field
// order, zero fields left out.
func traceLine(e records.TraceEntry) string {
	var sb strings.Builder
	fmt.Fprintf(&sb, `{"seq":%d,"kind":%s`, e.Seq, jsonString(string(e.Kind)))
	field := func(name, js string, present bool) {
		if present {
			sb.WriteString(`,"` + name + `":` + js)
		}
	}
	field("schema", jsonString(e.Schema), e.Schema != "")
	field("input", uintJSON(e.Input), e.Input != 0)
	field("state_hash", hashJSON(e.StateHash), e.StateHash != nil)
	field("deleted", "true", e.Deleted)
	field("emitted", uintsJSON(e.Emitted), len(e.Emitted) > 0)
	field("intents", hashesJSON(e.Intents), len(e.Intents) > 0)
	field("effect", jsonString(e.Effect), e.Effect != "")
	field("status", jsonString(e.Status), e.Status != "")
	field("executor", jsonString(e.Executor), e.Executor != "")
	field("attempt", uintJSON(e.Attempt), e.Attempt != 0)
	field("frame_seq", uintJSON(e.FrameSeq), e.FrameSeq != 0)
	field("reason", jsonString(e.Reason), e.Reason != "")
	v := valueJSON(e.Value)
	field("value", v, v != "null")
	field("action", jsonString(e.Action), e.Action != "")
	field("fault", uintJSON(e.Fault), e.Fault != 0)
	field("skipped", uintJSON(e.Skipped), e.Skipped != 0)
	sb.WriteByte('}')
	return sb.String()
}

// htmlEscape escapes what encoding/json escapes by default beyond
// schemas.ToJSON. The characters occur only inside strings in JSON text.
var htmlEscape = strings.NewReplacer("<", `\u003c`, ">", `\u003e`, "&", `\u0026`, "\u2028", `\u2028`, "\u2029", `\u2029`)

// valueJSON renders canonical CBOR as JSON; "null" when it has none.
func valueJSON(v []byte) string {
	js, err := schemas.ToJSON(v)
	if err != nil {
		return "null"
	}
	return htmlEscape.Replace(string(js))
}

func keyJSON(k []byte) string    { return htmlEscape.Replace(string(records.KeyJSON(k))) }
func jsonString(s string) string { return valueJSON(schemas.MustMarshal(s)) }
func uintJSON(n uint64) string   { return strconv.FormatUint(n, 10) }
func hashJSON(h *schemas.Hash) string {
	if h == nil {
		return "null"
	}
	return `"` + h.String() + `"`
}

func uintsJSON(ns []uint64) string {
	if ns == nil {
		return "null"
	}
	s := make([]string, len(ns))
	for i, n := range ns {
		s[i] = uintJSON(n)
	}
	return "[" + strings.Join(s, ",") + "]"
}

func hashesJSON(hs []schemas.Hash) string {
	if hs == nil {
		return "null"
	}
	s := make([]string, len(hs))
	for i := range hs {
		s[i] = hashJSON(&hs[i])
	}
	return "[" + strings.Join(s, ",") + "]"
}

// object renders a JSON object with its keys sorted.
func object(f map[string]string) string {
	names := make([]string, 0, len(f))
	for k := range f {
		names = append(names, k)
	}
	sort.Strings(names)
	for i, k := range names {
		names[i] = jsonString(k) + ":" + f[k]
	}
	return "{" + strings.Join(names, ",") + "}"
}

func shortHashes(s string) string {
	for {
		i := strings.Index(s, "sha256:")
		if i < 0 {
			return s
		}
		end := i + 7 + 64
		if end > len(s) {
			return s
		}
		s = s[:i] + s[i+7:i+15] + s[end:]
	}
}
