package schemas_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// benchEventJSON is a ~200-byte domain event once encoded.
const benchEventJSON = `{"order_id":"ord-000123456","customer":"cust-98765","items":[{"sku":"SKU-1","qty":2,"price":1999},{"sku":"SKU-22","qty":1,"price":4550}],` +
	`"total":8548,"currency":"EUR","note":"leave at the door, ring twice","placed_at_ns":1732320000000000000,"payload":"AAECAwQFBgcICQoLDA0ODw=="}`

const benchSchema = `{"type":"object","required":["order_id","items","total"],"additionalProperties":false,"properties":{
	"order_id":{"type":"string","minLength":1},"customer":{"type":"string"},
	"items":{"type":"array","items":{"type":"object","required":["sku","qty"],"properties":{"sku":{"type":"string"},"qty":{"type":"integer","minimum":1},"price":{"type":"integer","minimum":0}}}},
	"total":{"type":"integer","minimum":0},"currency":{"enum":["EUR","USD"]},"note":{"type":"string","maxLength":200},
	"placed_at_ns":{"type":"integer","minimum":0},"payload":{"type":"string","contentEncoding":"base64"}}}`

func benchSetup(b *testing.B) (*schemas.Registry, []byte, any) {
	r := schemas.NewRegistry()
	if err := r.Define([]schemas.SchemaDef{{Name: "bench/OrderPlaced@1", Schema: []byte(benchSchema)}}); err != nil {
		b.Fatal(err)
	}
	enc, err := r.FromJSON("bench/OrderPlaced@1", []byte(benchEventJSON))
	if err != nil {
		b.Fatal(err)
	}
	v, err := schemas.Decode(enc)
	if err != nil {
		b.Fatal(err)
	}
	return r, enc, v
}

func BenchmarkMarshal(b *testing.B) {
	_, enc, v := benchSetup(b)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schemas.Marshal(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecode(b *testing.B) {
	_, enc, _ := benchSetup(b)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := schemas.Decode(enc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHashBytes(b *testing.B) {
	_, enc, _ := benchSetup(b)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		_ = schemas.HashBytes(enc)
	}
}

func BenchmarkHashValue(b *testing.B) {
	_, enc, v := benchSetup(b)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := schemas.HashValue(v); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromJSON(b *testing.B) {
	r, enc, _ := benchSetup(b)
	js := []byte(benchEventJSON)
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.FromJSON("bench/OrderPlaced@1", js); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkFromValue(b *testing.B) {
	r, enc, _ := benchSetup(b)
	d := json.NewDecoder(strings.NewReader(benchEventJSON))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(enc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.FromValue("bench/OrderPlaced@1", v); err != nil {
			b.Fatal(err)
		}
	}
}

// benchValidate runs Validate as callers see it (fast: the fast path, when
// the schema has a plan) and its general path alone (slow).
func benchValidate(b *testing.B, r *schemas.Registry, name string, enc []byte) {
	if !schemas.FastValid(r, name, enc) {
		b.Fatalf("%s: the fast path does not accept the payload", name)
	}
	for _, mode := range []struct {
		name     string
		validate func(*schemas.Registry, string, []byte) error
	}{{"fast", (*schemas.Registry).Validate}, {"slow", schemas.ValidateSlow}} {
		b.Run(mode.name, func(b *testing.B) {
			b.SetBytes(int64(len(enc)))
			b.ReportAllocs()
			for b.Loop() {
				if err := mode.validate(r, name, enc); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidate(b *testing.B) {
	r, enc, _ := benchSetup(b)
	benchValidate(b, r, "bench/OrderPlaced@1", enc)
}

func BenchmarkValidateWorkflowContext(b *testing.B) {
	r := schemas.NewRegistry()
	enc, err := r.FromJSON("sys/WorkflowContext@1", []byte(`{"now_ns":1732320000000000000,"logical_now_ns":1732320000000000000,"entropy":"`+b64(32)+
		`","journal_height":123456,"event_hash":`+h0+`,"manifest_hash":`+h0+`,"workflow":"com.acme/order.step@1","workflow_hash":`+h0+`,"key":"b3JkLTE=","cell_mode":true}`))
	if err != nil {
		b.Fatal(err)
	}
	benchValidate(b, r, "sys/WorkflowContext@1", enc)
}

func BenchmarkValidateReceiptEnvelope(b *testing.B) {
	r := schemas.NewRegistry()
	enc, err := r.FromJSON("sys/EffectReceiptEnvelope@1", []byte(`{"origin_workflow":"com.acme/order.step@1","origin_workflow_hash":`+h0+
		`,"origin_key":"b3JkLTE=","intent_hash":`+h0+`,"effect":"sys/http.request@1","executor":"http","payload":"`+b64(64)+
		`","status":"ok","emitted_at_seq":42,"signature":"`+b64(64)+`"}`))
	if err != nil {
		b.Fatal(err)
	}
	benchValidate(b, r, "sys/EffectReceiptEnvelope@1", enc)
}

// BenchmarkFromJSONNoBytes: an event schema with no byte strings (the
// common shape of a domain event), where FromJSON can take its fast path.
func BenchmarkFromJSONNoBytes(b *testing.B) {
	r := schemas.NewRegistry()
	if err := r.Define([]schemas.SchemaDef{{Name: "bench/Count@1", Schema: []byte(`{"type":"object","additionalProperties":false,
		"required":["key","by"],"properties":{"key":{"type":"string","minLength":1,"maxLength":64},"by":{"type":"integer","minimum":-1000,"maximum":1000},
		"note":{"type":"string"},"tags":{"type":"array","items":{"enum":["a","b","c"]},"maxItems":8}}}`)}}); err != nil {
		b.Fatal(err)
	}
	js := []byte(`{"key":"key-00042","by":7,"note":"from the benchmark","tags":["a","c"]}`)
	b.Run("fast", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := r.FromJSON("bench/Count@1", js); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("slow", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := schemas.FromJSONSlow(r, "bench/Count@1", js); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDecodeJSON: the strict JSON parser against the encoding/json
// token walk it replaced, on a small event and on benchEventJSON.
func BenchmarkDecodeJSON(b *testing.B) {
	for _, in := range []struct{ name, js string }{
		{"small", `{"key":"key-00042","by":7,"note":"from the benchmark","tags":["a","c"]}`},
		{"event", benchEventJSON},
		{"schema", benchSchema},
	} {
		for _, impl := range []struct {
			name   string
			decode func([]byte) (any, error)
		}{{"new", schemas.DecodeJSON}, {"reference", schemas.DecodeJSONReference}} {
			b.Run(in.name+"/"+impl.name, func(b *testing.B) {
				js := []byte(in.js)
				b.SetBytes(int64(len(js)))
				b.ReportAllocs()
				for b.Loop() {
					if _, err := impl.decode(js); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
