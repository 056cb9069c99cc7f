package sys_test

import (
	"bytes"
	"encoding/json"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/schemas"
)

const hash = "sha256:0000000000000000000000000000000000000000000000000000000000000000"

// shapes are a filled value of every shape, by the schema it is.
var shapes = map[string]any{
	sys.SchemaContext: &sys.Context{NowNs: 1, LogicalNowNs: 2, Entropy: bytes.Repeat([]byte{7}, 32), JournalHeight: 3,
		EventHash: hash, ManifestHash: hash, Workflow: "com.example/w@1", WorkflowHash: hash, Key: []byte{0x61, 0x61}, CellMode: true},
	sys.SchemaReceiptEnvelope: &sys.ReceiptEnvelope{OriginWorkflow: "com.example/w@1", OriginWorkflowHash: hash, OriginKey: []byte{0x61, 0x61},
		IntentHash: hash, Effect: sys.EffectTimerSet, Executor: "timer", IssuerRef: "r", Payload: []byte{0xa0}, Status: sys.StatusOK,
		EmittedAtSeq: 4, Signature: []byte{1, 2}},
	sys.SchemaReceiptRejected: &sys.ReceiptRejected{OriginWorkflow: "com.example/w@1", OriginKey: []byte{0x61, 0x61}, IntentHash: hash,
		Effect: "com.example/e@1", Error: "bad", EmittedAtSeq: 5},
	sys.SchemaEffectCancelled: &sys.EffectCancelled{OriginWorkflow: "com.example/w@1", OriginKey: []byte{0x61, 0x61}, IntentHash: hash,
		Effect: sys.EffectTimerSet, IssuerRef: "r", EmittedAtSeq: 5, CancelSeq: 9, Reason: "customer asked", By: "ops"},
	sys.SchemaStreamFrame:     &sys.StreamFrame{IntentHash: hash, Seq: 1, Executor: "payments", Payload: []byte{0x01}},
	sys.SchemaTimerSetParams:  &sys.TimerSetParams{DeliverAtNs: 6, Key: "k"},
	sys.SchemaTimerSetReceipt: &sys.TimerSetReceipt{DeliveredAtNs: 7, Key: "k"},
	sys.SchemaBlobPutReceipt:  &sys.BlobPutReceipt{BlobRef: hash, Size: 8},
}

// TestShapesMatchSchemas holds each shape to its built-in JSON Schema
// (schemas/sys.go): the same fields, optional exactly where the tag says
// omitempty, and a filled value that validates, as does one with every
// optional field left out.
func TestShapesMatchSchemas(t *testing.T) {
	docs := schemas.SysSchemaJSON()
	reg := schemas.NewRegistry()
	for name, v := range shapes {
		var doc struct {
			Properties map[string]json.RawMessage `json:"properties"`
			Required   []string                   `json:"required"`
		}
		if err := json.Unmarshal(docs[name], &doc); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		typ := reflect.TypeOf(v).Elem()
		var fields []string
		for i := range typ.NumField() {
			tag, opts, _ := strings.Cut(typ.Field(i).Tag.Get("cbor"), ",")
			fields = append(fields, tag)
			if optional, required := opts == "omitempty", slices.Contains(doc.Required, tag); optional == required {
				t.Errorf("%s: field %s: omitempty %v, required by the schema %v (want exactly one)", name, tag, optional, required)
			}
		}
		props := make([]string, 0, len(doc.Properties))
		for p := range doc.Properties {
			props = append(props, p)
		}
		slices.Sort(fields)
		slices.Sort(props)
		if !slices.Equal(fields, props) {
			t.Errorf("%s: %s has fields %v, the schema properties %v", name, typ.Name(), fields, props)
		}
		b, err := schemas.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := reg.Validate(name, b); err != nil {
			t.Errorf("%s: a filled %s does not validate: %v", name, typ.Name(), err)
		}
		bare := reflect.New(typ)
		bare.Elem().Set(reflect.ValueOf(v).Elem())
		for i := range typ.NumField() {
			if strings.HasSuffix(typ.Field(i).Tag.Get("cbor"), ",omitempty") {
				bare.Elem().Field(i).SetZero()
			}
		}
		if b, err = schemas.Marshal(bare.Interface()); err != nil {
			t.Fatal(err)
		}
		if err := reg.Validate(name, b); err != nil {
			t.Errorf("%s: a %s without its optional fields does not validate: %v", name, typ.Name(), err)
		}
	}
	if len(shapes) != 8 {
		t.Fatalf("%d shapes checked", len(shapes))
	}
}
