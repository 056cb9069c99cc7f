package views_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v5"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/schemas/randval"
	"github.com/aos-kernel/aos/views"
)

// exportGen draws random records of every kind for the export's round
// trip: values that have an exact JSON form, values whose JSON form is
// lossy (byte strings), bytes that are no CBOR at all, nil and empty byte
// slices, keys of every shape, and every optional field absent and present.
type exportGen struct{ *randval.Gen }

// value is canonical CBOR of a random JSON-model value, or random bytes,
// nil or empty.
func (g exportGen) value() []byte {
	switch g.R.IntN(6) {
	case 0:
		return g.Bytes() // nil, empty or random: mostly no CBOR item
	case 1:
		return schemas.MustMarshal(nil) // the null item: JSON null
	}
	return schemas.MustMarshal(g.tree(3))
}

// tree is a random JSON-model value; byte strings and non-text map keys
// have no exact JSON form.
func (g exportGen) tree(depth int) any {
	r := g.R
	n := 6
	if depth > 0 {
		n = 8
	}
	switch r.IntN(n) {
	case 0:
		return nil
	case 1:
		return r.IntN(2) == 0
	case 2:
		return int64(g.Num()>>1) * []int64{1, -1}[r.IntN(2)]
	case 3:
		return []string{"", "a", "<&>", "é\u2028", "ok \"quoted\"", "1.5"}[r.IntN(6)] + g.Str()
	case 4:
		return []float64{1.5, -0.25, 1e300, 3.141592653589793}[r.IntN(4)]
	case 5:
		return g.Bytes()
	case 6:
		var out []any
		for range r.IntN(4) {
			out = append(out, g.tree(depth-1))
		}
		return out
	}
	if r.IntN(5) == 0 {
		return map[any]any{uint64(r.IntN(9)): g.tree(depth - 1)} // a non-text key
	}
	m := map[string]any{}
	for range r.IntN(4) {
		m[g.Str()] = g.tree(depth - 1)
	}
	return m
}

// key is a cell key: none, empty, or canonical CBOR of a string, a number,
// a map, bytes, or null.
func (g exportGen) key() []byte {
	switch g.R.IntN(7) {
	case 0:
		return nil
	case 1:
		return []byte{}
	case 2:
		return schemas.MustMarshal(nil)
	case 3:
		return schemas.MustMarshal(g.Bytes())
	case 4:
		return g.Bytes()
	}
	return schemas.MustMarshal(g.tree(1))
}

func (g exportGen) stamp() records.Stamp {
	return records.Stamp{NowNs: g.Num(), LogicalNs: g.Num(), Entropy: g.Bytes(), Height: g.Num(), ManifestHash: g.Hash()}
}

func (g exportGen) limits() records.Limits {
	var l records.Limits
	v := reflect.ValueOf(&l).Elem()
	for i := range v.NumField() {
		if g.R.IntN(2) == 0 {
			v.Field(i).SetInt(int64(g.Num() >> 1))
		}
	}
	return l
}

// receipt is a signed receipt as the journal holds one: it passed Check,
// so its payload is one canonical CBOR item (never empty); the signature
// is random bytes of any length (the export does not judge it).
func (g exportGen) receipt() receipts.SignedReceipt {
	p := schemas.MustMarshal(g.tree(3))
	if g.R.IntN(4) == 0 {
		p = schemas.MustMarshal(g.Bytes())
	}
	return receipts.SignedReceipt{Receipt: receipts.Receipt{World: g.Str(), Intent: g.Hash(), Effect: g.Str(), Executor: g.Str(),
		Status: receipts.Status(g.Str()), Payload: p, Attempt: g.Num(), IssuerRef: g.Str()}, KeyID: g.Str(), Signature: g.Bytes()}
}

// records draws one record of each kind journal.Kinds lists; a kind
// without a generator fails the test, so a kind added to the journal
// must be given an export (and a case here) before the tests pass.
func (g exportGen) record(t *testing.T, kind journal.Kind) any {
	r := g.R
	switch kind {
	case journal.KindEvent:
		ev := &records.EventRec{Schema: g.Str(), Value: g.value(), Stamp: g.stamp()}
		switch r.IntN(3) {
		case 1:
			ev.Targets = []records.TargetRec{}
		case 2:
			for range 1 + r.IntN(4) {
				ev.Targets = append(ev.Targets, records.TargetRec{Workflow: g.Str(), Key: g.key()})
			}
		}
		if r.IntN(2) == 0 {
			ev.Origin = &records.OriginRec{Workflow: g.Str(), Key: g.key(), Step: g.Num(), Depth: g.Num()}
		}
		if r.IntN(2) == 0 {
			ev.IdempotencyKey = "idem-" + g.Str()
		}
		return ev
	case journal.KindStep:
		st := &records.StepRec{Input: g.Num(), Workflow: g.Str(), WorkflowHash: g.Hash(), Key: g.key()}
		if r.IntN(2) == 0 {
			h := g.Hash()
			st.StateHash = &h
		}
		for range r.IntN(3) * r.IntN(4) {
			st.Emitted = append(st.Emitted, g.Num())
		}
		for range r.IntN(3) * r.IntN(4) {
			st.Intents = append(st.Intents, g.Hash())
		}
		return st
	case journal.KindIntent:
		return &records.IntentRec{Hash: g.Hash(), IntentID: records.IntentID{World: g.Str(), OriginWorkflow: g.Str(), OriginWorkflowHash: g.Hash(),
			OriginKey: g.key(), Effect: g.Str(), EffectHash: g.Hash(), Params: g.value(), IdempotencyKey: g.Bytes(),
			IssuerRef: g.Str(), EmittedAt: g.Num(), Index: g.Num()}}
	case journal.KindReceipt:
		return &records.ReceiptRec{Receipt: g.receipt(), Stamp: g.stamp(), Rejected: g.Str()}
	case journal.KindDrop:
		return &records.DropRec{Receipt: g.receipt(), Reason: g.Str()}
	case journal.KindFrame:
		fr := &records.FrameRec{Intent: g.Hash(), Seq: g.Num(), Executor: g.Str(), Payload: g.value(), Stamp: g.stamp()}
		if r.IntN(3) > 0 { // frames journaled before frames were signed have none of these
			fr.Effect, fr.KeyID, fr.Signature = g.Str(), g.Str(), g.Bytes()
			fr.World = g.Str() // nor frames journaled before frames named their world
		}
		return fr
	case journal.KindManifest:
		m := &records.ManifestRec{Hash: g.Hash(), Name: g.Str(), Source: g.Bytes()}
		if r.IntN(2) == 0 {
			l := g.limits()
			m.Limits = &l
		}
		switch r.IntN(4) {
		case 1:
			m.StateChange = &records.StateChangeRec{}
		case 2:
			m.StateChange = &records.StateChangeRec{Workflows: []string{}, Epoch: g.Num()}
		case 3:
			m.StateChange = &records.StateChangeRec{Workflows: []string{g.Str(), "x" + g.Str()}, Epoch: g.Num()}
		}
		m.Pin = r.IntN(2) == 0
		return m
	case journal.KindRetire:
		return &records.RetireRec{Hash: g.Hash(), Name: g.Str()}
	case journal.KindMove:
		m := &records.MoveRec{Workflow: g.Str(), Key: g.key(), From: g.Hash(), To: g.Hash(), Inputs: []uint64{}, Since: g.Str()}
		for range r.IntN(3) {
			m.Inputs = append(m.Inputs, g.Num())
		}
		if r.IntN(3) == 0 {
			h := g.Hash()
			m.Migrated = &h
		}
		if r.IntN(2) == 0 {
			h := g.Hash()
			m.StateHash = &h
		}
		return m
	case journal.KindCheckpoint:
		return &records.CheckpointRec{Reason: g.Str()}
	case journal.KindSnapshot:
		return &records.SnapshotRec{Checkpoint: g.Num(), Object: g.Hash(), Bytes: g.Num()}
	case journal.KindFault:
		return &records.FaultRec{Input: g.Num(), Workflow: g.Str(), Key: g.key(), Reason: g.Str(), Class: g.Str()}
	case journal.KindConfig:
		return &records.ConfigRec{Limits: g.limits()}
	case journal.KindWorld:
		return &records.WorldRec{ID: "world:" + g.Str()}
	case journal.KindRecover:
		return &records.RecoverRec{Workflow: g.Str(), Key: g.key(), Action: g.Str(), Fault: g.Num(), Input: g.Num(),
			Skipped: g.Num(), Stamp: g.stamp(), Parked: g.Num(), DropParked: r.IntN(2) == 0}
	case journal.KindModule:
		m := &records.ModuleRec{Module: g.Str(), Hash: g.Hash(), Action: g.Str(), Workflows: []string{}, Reason: g.Str(), Parked: g.Num()}
		for range r.IntN(3) {
			m.Workflows = append(m.Workflows, g.Str())
		}
		if r.IntN(2) == 0 {
			st := g.stamp()
			m.Stamp = &st
		}
		return m
	case journal.KindCancel:
		return &records.CancelRec{Intent: g.Hash(), Effect: g.Str(), Workflow: g.Str(), Key: g.key(), Reason: g.Str(),
			By: g.Str(), Stamp: g.stamp()}
	}
	t.Fatalf("record kind %q has no generator here: give it an export (export.go) and a case in exportGen.record", kind)
	return nil
}

// exportLine is a record's export line, as GET /v1/journal writes it.
func exportLine(t *testing.T, r journal.Record) []byte {
	t.Helper()
	d, err := views.Describe(r)
	if err != nil {
		t.Fatalf("describe seq %d (%s): %v", r.Seq, r.Kind, err)
	}
	line, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("marshal seq %d (%s): %v", r.Seq, r.Kind, err)
	}
	return line
}

// TestExportLossless: for every record kind the journal defines, random
// records exported as JSON and read back (ParseRecord) give the journaled
// body byte for byte. A field the export drops, renames one way only, or
// renders inexactly fails here.
func TestExportLossless(t *testing.T) {
	g := exportGen{randval.Seeded(t)}
	for i := range 3000 {
		for _, kind := range journal.Kinds() {
			rec := g.record(t, kind)
			r := journal.Record{Seq: g.Num(), Kind: kind, Body: schemas.MustMarshal(rec)}
			line := exportLine(t, r)
			back, err := views.ParseRecord(line)
			if err != nil {
				t.Fatalf("round %d, %s: parse %s: %v", i, kind, line, err)
			}
			if back.Seq != r.Seq || back.Kind != r.Kind || !bytes.Equal(back.Body, r.Body) {
				t.Fatalf("round %d, %s: export is not lossless\nrecord %+v\nline   %s\nbody   %x\nback   %x (seq %d, kind %s)",
					i, kind, rec, line, r.Body, back.Body, back.Seq, back.Kind)
			}
		}
	}
}

// TestExportNamesEveryField: every field of every record type (nested
// types included) appears in the export under its own CBOR name (a value
// or key field as NAME or NAME_cbor). A field added to a record without an
// export fails here even before the round trip would. Optional fields are
// left out when empty, so the names of many random records are pooled.
func TestExportNamesEveryField(t *testing.T) {
	g := exportGen{randval.New(1)}
	for _, kind := range journal.Kinds() {
		have := map[string]bool{}
		var want []string
		for range 300 {
			rec := g.record(t, kind)
			want = cborNames(reflect.TypeOf(rec).Elem(), "")
			line := exportLine(t, journal.Record{Seq: 1, Kind: kind, Body: schemas.MustMarshal(rec)})
			var top struct{ Body json.RawMessage }
			if err := json.Unmarshal(line, &top); err != nil {
				t.Fatal(err)
			}
			for n := range jsonNames(t, top.Body, "") {
				have[n] = true
			}
		}
		for _, n := range want {
			if !have[n] && !have[n+"_cbor"] {
				t.Errorf("%s: field %s is never in the export (names seen: %v)", kind, n, have)
			}
		}
	}
}

// cborNames lists the CBOR field names of t as paths ("stamp/entropy"),
// recursing into struct fields; omitempty fields are listed too.
func cborNames(t reflect.Type, prefix string) []string {
	var out []string
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("cbor"), ",")
		ft := f.Type
		if ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous {
			out = append(out, cborNames(ft, prefix)...)
			continue
		}
		path := prefix + name
		out = append(out, path)
		if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && ft != reflect.TypeFor[schemas.Hash]() && ft != reflect.TypeFor[records.Limits]() {
			out = append(out, cborNames(ft, path+"/")...)
		}
	}
	return out
}

// jsonNames lists the member names of a JSON object as paths, recursing
// into objects and the first element of arrays; the signed receipt inside
// receipt and drop records is read as the JSON form it is.
func jsonNames(t *testing.T, js json.RawMessage, prefix string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	var m map[string]json.RawMessage
	if json.Unmarshal(js, &m) != nil {
		var a []json.RawMessage
		if json.Unmarshal(js, &a) == nil && len(a) > 0 {
			for k := range jsonNames(t, a[0], prefix) {
				out[k] = true
			}
		}
		return out
	}
	for k, v := range m {
		name := k
		if prefix == "receipt/" && k == "payload_cbor" {
			name = "payload"
		}
		out[prefix+name] = true
		for sub := range jsonNames(t, v, prefix+name+"/") {
			out[sub] = true
		}
	}
	return out
}

// TestExportFrameSeq: a frame's own seq is exported as "seq" (it was once
// shown as "attempt"), and a receipt keeps its attempt.
func TestExportFrameSeq(t *testing.T) {
	h := schemas.HashBytes([]byte("i"))
	fr := &records.FrameRec{Intent: h, Seq: 7, Executor: "x", Payload: schemas.MustMarshal(1)}
	line := exportLine(t, journal.Record{Seq: 3, Kind: journal.KindFrame, Body: schemas.MustMarshal(fr)})
	var e struct {
		Body map[string]json.RawMessage
	}
	if err := json.Unmarshal(line, &e); err != nil {
		t.Fatal(err)
	}
	if string(e.Body["seq"]) != "7" || e.Body["attempt"] != nil {
		t.Fatalf("frame export %s: want seq 7 and no attempt", line)
	}
}

// TestParseRecordRefuses: a line the export could not have written is
// refused with an error naming the seq and the field, never read as some
// other record.
func TestParseRecordRefuses(t *testing.T) {
	h := schemas.HashBytes([]byte("i"))
	ev := exportLine(t, journal.Record{Seq: 4, Kind: journal.KindEvent, Body: schemas.MustMarshal(&records.EventRec{Schema: "s@1",
		Value: schemas.MustMarshal(map[string]any{"b": []byte{1, 2}}), Targets: []records.TargetRec{{Workflow: "w@1", Key: schemas.MustMarshal([]byte{9})}}})})
	mf := exportLine(t, journal.Record{Seq: 6, Kind: journal.KindManifest, Body: schemas.MustMarshal(&records.ManifestRec{Hash: h, Name: "m", Source: []byte("{}")})})
	rc := exportLine(t, journal.Record{Seq: 5, Kind: journal.KindReceipt, Body: schemas.MustMarshal(&records.ReceiptRec{
		Receipt: receipts.SignedReceipt{Receipt: receipts.Receipt{Intent: h, Effect: "e@1", Executor: "x", Status: "ok",
			Payload: schemas.MustMarshal(1)}, KeyID: "k", Signature: []byte{1}}})})
	for _, c := range []struct{ name, line, want string }{
		{"not json", `{"seq":1,`, "json"},
		{"not an object", `[1]`, "cannot unmarshal array"},
		{"no body", `{"seq":1,"kind":"event"}`, "want an object with seq, kind and body"},
		{"unknown kind", `{"seq":9,"kind":"bogus","body":{}}`, `seq 9 (bogus): unknown record kind "bogus"`},
		{"unknown top field", strings.Replace(string(ev), `"kind"`, `"extra":1,"kind"`, 1), `unknown field "extra"`},
		{"unknown body field", strings.Replace(string(ev), `"schema"`, `"schemaz":"x","schema"`, 1), `seq 4 (event): body: json: unknown field "schemaz"`},
		{"duplicate key", strings.Replace(string(ev), `"schema":"s@1"`, `"schema":"s@1","schema":"t@1"`, 1), `duplicate`},
		{"value disagrees with value_cbor", strings.Replace(string(ev), `"value":{"b":"AQI="}`, `"value":{"b":"AQM="}`, 1), `seq 4 (event): value does not match value_cbor`},
		{"key disagrees with key_cbor", strings.Replace(string(ev), `"key":"CQ=="`, `"key":"CA=="`, 1), `seq 4 (event): targets/0/key does not match targets/0/key_cbor`},
		{"source_bytes not the source's", strings.Replace(string(mf), `"source_bytes":2`, `"source_bytes":3`, 1), `seq 6 (manifest): source_bytes is 3, but source holds 2 bytes`},
		{"bad value_cbor", strings.Replace(string(ev), `"value_cbor":"`, `"value_cbor":"!`, 1), `seq 4 (event): body: illegal base64`},
		{"bad hash", strings.Replace(string(rc), `"intent_hash":"sha256:`, `"intent_hash":"sha257:`, 1), `seq 5 (receipt): receipt:`},
		{"unknown receipt field", strings.Replace(string(rc), `"key_id"`, `"kid":1,"key_id"`, 1), `seq 5 (receipt): receipt: json: unknown field "kid"`},
		{"both payloads", strings.Replace(string(rc), `"payload":1`, `"payload":1,"payload_cbor":"AQ=="`, 1), `both payload and payload_cbor`},
		{"error line", `{"error":{"code":"unavailable","message":"the world stopped"}}`, `ended in an error: unavailable: the world stopped`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if strings.Contains(string(ev)+string(rc)+string(mf), c.line) {
				t.Fatalf("the line is one the export wrote: %s", c.line)
			}
			_, err := views.ParseRecord([]byte(c.line))
			if err == nil || !errors.Is(err, views.ErrExport) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("ParseRecord(%s):\n got %v\nwant an ErrExport containing %q", c.line, err, c.want)
			}
		})
	}
}

// journalLineSchema is docs/openapi.json's JournalLine, compiled as JSON
// Schema 2020-12 (OpenAPI 3.1's dialect), content encodings asserted.
func journalLineSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	doc, err := os.ReadFile(filepath.FromSlash("../docs/openapi.json"))
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.Draft = jsonschema.Draft2020
	c.AssertContent = true
	const url = "file:///openapi.json"
	if err := c.AddResource(url, bytes.NewReader(doc)); err != nil {
		t.Fatal(err)
	}
	s, err := c.Compile(url + "#/components/schemas/JournalLine")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// checkAgainstOpenAPI fails t unless every line is a JournalLine as
// docs/openapi.json describes it.
func checkAgainstOpenAPI(t *testing.T, lines []string) {
	t.Helper()
	s := journalLineSchema(t)
	for _, l := range lines {
		dec := json.NewDecoder(strings.NewReader(l))
		dec.UseNumber()
		var v any
		if err := dec.Decode(&v); err != nil {
			t.Fatal(err)
		}
		if err := s.Validate(v); err != nil {
			t.Errorf("export line is not openapi.json's JournalLine: %v\n%s", err, l)
		}
	}
}

// TestExportOfRareKindsMatchesOpenAPI: the kinds a business day without
// failures does not write (TestExportOfRealJournal checks the others),
// exported as the kernel writes them, are what docs/openapi.json says.
func TestExportOfRareKindsMatchesOpenAPI(t *testing.T) {
	h := schemas.HashBytes([]byte("i"))
	key := schemas.MustMarshal("o-1")
	priv, err := receipts.GenerateKey()
	if err != nil {
		t.Fatal(err)
	}
	sr := receipts.Sign(priv, receipts.Receipt{Intent: h, Effect: "com.example/charge@1", Executor: "payments",
		Status: receipts.StatusOK, Payload: schemas.MustMarshal(map[string]any{"raw": []byte{1}}), Attempt: 2})
	stamp := records.Stamp{NowNs: 5, LogicalNs: 5, Entropy: h[:], Height: 9, ManifestHash: h}
	var lines []string
	for i, rec := range []struct {
		kind journal.Kind
		v    any
	}{
		{journal.KindDrop, &records.DropRec{Receipt: sr, Reason: "intent settled by its cell's failure"}},
		{journal.KindFault, &records.FaultRec{Input: 3, Workflow: "w@1", Key: key, Reason: "trap", Class: "environmental"}},
		{journal.KindFault, &records.FaultRec{Input: 3, Workflow: "w@1", Reason: "trap"}},
		{journal.KindRecover, &records.RecoverRec{Workflow: "w@1", Key: key, Action: "retry", Fault: 4, Input: 3, Skipped: 1, Stamp: stamp}},
		{journal.KindRecover, &records.RecoverRec{Workflow: "w@1", Key: key, Action: "skip", Fault: 4, Input: 3, Stamp: stamp, Parked: 3, DropParked: true}},
		{journal.KindModule, &records.ModuleRec{Module: "m@1", Hash: h, Action: records.ModuleAside, Workflows: []string{"w@1"}, Reason: "timed out"}},
		{journal.KindModule, &records.ModuleRec{Module: "m@1", Hash: h, Action: records.ModuleResume, Workflows: []string{"w@1"}, Reason: "resumed by an operator",
			Parked: 2, Stamp: &stamp}},
		{journal.KindFrame, &records.FrameRec{Intent: h, Seq: 1, Executor: "payments", Payload: schemas.MustMarshal(1), Stamp: stamp}},
		{journal.KindEvent, &records.EventRec{Schema: "s@1", Value: schemas.MustMarshal([]byte{1}), Stamp: stamp,
			Origin: &records.OriginRec{Workflow: "w@1", Key: schemas.MustMarshal([]byte{2}), Step: 7, Depth: 1}}},
		{journal.KindManifest, &records.ManifestRec{Hash: h, Name: "m", Source: []byte("x"),
			StateChange: &records.StateChangeRec{Workflows: []string{"w@1"}, Epoch: 8}}},
		{journal.KindManifest, &records.ManifestRec{Hash: h, Name: "m2", Source: []byte("y"), Pin: true,
			StateChange: &records.StateChangeRec{Workflows: []string{}}}},
		{journal.KindRetire, &records.RetireRec{Hash: h, Name: "m"}},
		{journal.KindMove, &records.MoveRec{Workflow: "w@1", Key: key, From: h, To: h, Inputs: []uint64{3, 5}, Since: "creation", StateHash: &h}},
		{journal.KindMove, &records.MoveRec{Workflow: "w@1", From: h, To: h, Inputs: []uint64{3}, Since: "snapshot"}},
		{journal.KindMove, &records.MoveRec{Workflow: "w@1", Key: key, From: h, To: h, Inputs: []uint64{}, Since: "rest", StateHash: &h, Migrated: &h}},
		{journal.KindIntent, &records.IntentRec{Hash: h, IntentID: records.IntentID{OriginWorkflow: "w@1", OriginKey: key,
			Effect: "e@1", Params: schemas.MustMarshal([]byte{3}), IdempotencyKey: []byte("k"), IssuerRef: "r", EmittedAt: 7}}},
	} {
		lines = append(lines, string(exportLine(t, journal.Record{Seq: uint64(i + 1), Kind: rec.kind, Body: schemas.MustMarshal(rec.v)})))
	}
	checkAgainstOpenAPI(t, lines)
}
