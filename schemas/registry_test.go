package schemas_test

import (
	"encoding/base64"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

func TestDefineRefsInAnyOrder(t *testing.T) {
	r := schemas.NewRegistry()
	err := r.Define([]schemas.SchemaDef{
		{Name: "com.acme/Order@1", Schema: []byte(`{"type":"object","required":["id"],"properties":{"id":{"$ref":"com.acme/OrderId@1"},"ctx":{"$ref":"sys/BlobGetParams@1"}}}`)},
		{Name: "com.acme/OrderEvent@1", Variant: []schemas.Arm{{Tag: "Placed", Schema: "com.acme/Order@1"}, {Tag: "Cancelled", Schema: "com.acme/OrderId@1"}}},
		{Name: "com.acme/OrderId@1", Schema: []byte(`{"type":"string","minLength":1}`)},
	})
	if err != nil {
		t.Fatalf("define: %v", err)
	}
	// A later batch may reference earlier defs.
	if err := r.Define([]schemas.SchemaDef{{Name: "com.acme/List@1", Schema: []byte(`{"type":"array","items":{"$ref":"com.acme/OrderEvent@1"}}`)}}); err != nil {
		t.Fatalf("second define: %v", err)
	}
	if _, err := r.FromJSON("com.acme/List@1", []byte(`[{"$tag":"Cancelled","$value":"o-1"},{"$tag":"Placed","$value":{"id":"o-2"}}]`)); err != nil {
		t.Fatal(err)
	}
	if _, err := r.FromJSON("com.acme/List@1", []byte(`[{"$tag":"Placed","$value":{"id":""}}]`)); err == nil || !strings.Contains(err.Error(), "/0/$value/id") {
		t.Fatalf("want error at /0/$value/id, got %v", err)
	}
	arms := r.Arms("com.acme/OrderEvent@1")
	if len(arms) != 2 || arms[0].Tag != "Placed" || arms[1].Schema != "com.acme/OrderId@1" {
		t.Fatalf("arms = %v", arms)
	}
	if r.Arms("com.acme/Order@1") != nil {
		t.Fatal("non-variant has arms")
	}
	if !r.Has("com.acme/OrderId@1") || r.Has("com.acme/OrderId@2") || !r.Has("sys/WorkflowContext@1") {
		t.Fatal("Has is wrong")
	}
	// Identical redefinition is a no-op; a different one is refused.
	if err := r.Define([]schemas.SchemaDef{{Name: "com.acme/OrderId@1", Schema: []byte(`{"type":"string","minLength":1}`)}}); err != nil {
		t.Fatalf("identical redefinition: %v", err)
	}
	if err := r.Define([]schemas.SchemaDef{{Name: "com.acme/OrderId@1", Schema: []byte(`{"type":"string"}`)}}); err == nil {
		t.Fatal("different redefinition accepted")
	}
}

func TestDefineReportsEveryProblem(t *testing.T) {
	r := schemas.NewRegistry()
	before := r.Names()
	err := r.Define([]schemas.SchemaDef{
		{Name: "com.acme/Good@1", Schema: []byte(`{"type":"string"}`)},
		{Name: "sys/WorkflowContext@1", Schema: []byte(`{}`)},
		{Name: "no-version", Schema: []byte(`{}`)},
		{Name: "com.acme/Zero@0", Schema: []byte(`{}`)},
		{Name: "com.acme/Bad@1", Schema: []byte(`{"type":"strng","properties":{"x":{"$ref":"com.acme/Missing@1"},"y":{"minimum":"3"}}}`)},
		{Name: "com.acme/Web@1", Schema: []byte(`{"$ref":"http://example.com/x"}`)},
		{Name: "com.acme/File@1", Schema: []byte(`{"properties":{"a":{"$ref":"other.json#/x"}}}`)},
		{Name: "com.acme/Meta@1", Schema: []byte(`{"$schema":"http://example.com/my-meta"}`)},
		{Name: "com.acme/Id@1", Schema: []byte(`{"$id":"http://example.com/s"}`)},
		{Name: "com.acme/Enc@1", Schema: []byte(`{"contentEncoding":"base32"}`)},
		{Name: "com.acme/NotJSON@1", Schema: []byte(`{"type":`)},
		{Name: "com.acme/DupKey@1", Schema: []byte(`{"type":"string","type":"number"}`)},
		{Name: "com.acme/Good@1", Schema: []byte(`{"type":"string"}`)},
		{Name: "com.acme/V@1", Variant: []schemas.Arm{{Tag: "A", Schema: "com.acme/Nope@1"}, {Tag: "", Schema: "com.acme/Good@1"}, {Tag: "B", Schema: "not a name"}}},
		{Name: "com.acme/Both@1", Schema: []byte(`{}`), Variant: []schemas.Arm{{Tag: "A", Schema: "com.acme/Good@1"}}},
		{Name: "com.acme/UsesBad@1", Schema: []byte(`{"$ref":"com.acme/Bad@1"}`)},
	})
	var de schemas.DefErrors
	if !errors.As(err, &de) {
		t.Fatalf("want DefErrors, got %T %v", err, err)
	}
	want := []struct{ name, ptr, msg string }{
		{"sys/WorkflowContext@1", "/name", "built in"},
		{"no-version", "/name", "bad name"},
		{"com.acme/Zero@0", "/name", "bad name"},
		{"com.acme/Bad@1", "/schema/type", "must be one of"},
		{"com.acme/Bad@1", "/schema/properties/x/$ref", `unknown schema "com.acme/Missing@1"`},
		{"com.acme/Bad@1", "/schema/properties/y/minimum", "expected number"},
		{"com.acme/Web@1", "/schema/$ref", "never loaded from files or URLs"},
		{"com.acme/File@1", "/schema/properties/a/$ref", "never loaded"},
		{"com.acme/Meta@1", "/schema/$schema", "unsupported $schema"},
		{"com.acme/Id@1", "/schema/$id", "not allowed"},
		{"com.acme/Enc@1", "/schema/contentEncoding", "only base64"},
		{"com.acme/NotJSON@1", "/schema", "invalid JSON"},
		{"com.acme/DupKey@1", "/schema", "duplicate object key"},
		{"com.acme/Good@1", "/name", "more than once"},
		{"com.acme/V@1", "/variant/A", "unknown schema"},
		{"com.acme/V@1", "/variant/1", "tag is empty"},
		{"com.acme/V@1", "/variant/B", "not a def name"},
		{"com.acme/Both@1", "", "not both"},
	}
	for _, w := range want {
		found := false
		for _, e := range de {
			if e.Name == w.name && e.Pointer == w.ptr && strings.Contains(e.Msg, w.msg) {
				found = true
			}
		}
		if !found {
			t.Errorf("missing error %s %s: %s\ngot:\n%v", w.name, w.ptr, w.msg, err)
		}
	}
	for _, e := range de {
		if e.Name == "com.acme/UsesBad@1" {
			t.Errorf("a def that only references a broken one is reported: %v", e)
		}
	}
	if !reflect.DeepEqual(r.Names(), before) || r.Has("com.acme/Good@1") {
		t.Fatal("registry changed by a failed Define")
	}
}

// TestNoURLLoading: nothing in a def can make the compiler read a file or the network.
func TestNoURLLoading(t *testing.T) {
	r := schemas.NewRegistry()
	for _, s := range []string{
		`{"$ref":"http://example.com/x"}`,
		`{"$ref":"https://example.com/x#/defs/a"}`,
		`{"$ref":"file:///etc/passwd"}`,
		`{"$schema":"http://example.com/schema"}`,
		`{"$ref":"urn:x:y"}`,
		`{"$ref":"/etc/passwd"}`,
	} {
		err := r.Define([]schemas.SchemaDef{{Name: "t/X@1", Schema: []byte(s)}})
		if err == nil {
			t.Errorf("%s accepted", s)
		}
	}
}

func TestLocalAndFragmentRefs(t *testing.T) {
	r := schemas.NewRegistry()
	err := r.Define([]schemas.SchemaDef{
		{Name: "t/Lib@1", Schema: []byte(`{"$defs":{"blob":{"type":"string","contentEncoding":"base64"}},"type":"null"}`)},
		{Name: "t/Use@1", Schema: []byte(`{"type":"object","properties":{"a":{"$ref":"t/Lib@1#/$defs/blob"},"b":{"$ref":"#/$defs/n"}},"$defs":{"n":{"type":"integer"}}}`)},
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := r.FromJSON("t/Use@1", []byte(`{"a":"AA==","b":7}`))
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprintf("%x", b) != "a26161410061620"+"7" {
		t.Fatalf("got %x", b)
	}
	if _, err := r.FromJSON("t/Use@1", []byte(`{"b":7.5}`)); err == nil {
		t.Fatal("7.5 accepted as integer")
	}
}

func b64(n int) string { return base64.StdEncoding.EncodeToString(make([]byte, n)) }

const h0 = `"sha256:0000000000000000000000000000000000000000000000000000000000000000"`

func TestSysSchemas(t *testing.T) {
	r := schemas.NewRegistry()
	good := map[string]string{
		"sys/WorkflowContext@1": `{"now_ns":1,"logical_now_ns":2,"entropy":"` + b64(32) + `","journal_height":3,"event_hash":` + h0 +
			`,"manifest_hash":` + h0 + `,"workflow":"com.acme/order.step@1","workflow_hash":` + h0 + `,"key":"AA==","cell_mode":true}`,
		"sys/EffectReceiptEnvelope@1": `{"origin_workflow":"a/b@1","origin_workflow_hash":` + h0 + `,"intent_hash":` + h0 +
			`,"effect":"sys/timer.set@1","executor":"timer","payload":"","status":"ok","emitted_at_seq":9,"signature":"` + b64(64) + `"}`,
		"sys/EffectReceiptRejected@1": `{"origin_workflow":"a/b@1","origin_key":"AQ==","intent_hash":` + h0 + `,"effect":"a/e@1","error":"bad payload","emitted_at_seq":1}`,
		"sys/EffectCancelled@1": `{"origin_workflow":"a/b@1","origin_key":"AQ==","intent_hash":` + h0 +
			`,"effect":"sys/timer.set@1","emitted_at_seq":1,"cancel_seq":5,"reason":"not needed","by":"ops"}`,
		"sys/EffectStreamFrame@1":  `{"intent_hash":` + h0 + `,"seq":1,"executor":"x","payload":"AA=="}`,
		"sys/TimerSetParams@1":     `{"deliver_at_ns":1000,"key":"k"}`,
		"sys/TimerSetReceipt@1":    `{"delivered_at_ns":1000}`,
		"sys/HttpRequestParams@1":  `{"method":"GET","url":"https://example.com","headers":{"a":"b"},"body":"","timeout_ms":100,"max_body_bytes":1024}`,
		"sys/HttpRequestReceipt@1": `{"status":200,"headers":{},"body":"aGk=","truncated":false}`,
		"sys/HttpRequestParams@2": `{"method":"POST","url":"https://example.com","headers":{"a":"b"},"body":"aGk=","timeout_ms":100,"max_body_bytes":1024,` +
			`"retry":{"max_attempts":4,"initial_backoff_ms":50,"max_backoff_ms":1000,"multiplier":3,"retry_statuses":[500,503],"no_status_retry":false}}`,
		"sys/HttpRequestReceipt@2": `{"status":503,"headers":{"retry-after":"1"},"body":"aGk=","attempts":2}`,
		"sys/BlobPutParams@1":      `{"bytes":"aGk="}`,
		"sys/BlobPutReceipt@1":     `{"blob_ref":` + h0 + `,"size":2}`,
		"sys/BlobGetParams@1":      `{"blob_ref":` + h0 + `}`,
		"sys/BlobGetReceipt@1":     `{"bytes":"aGk=","size":2}`,
	}
	if len(good) != len(schemas.SysNames()) {
		t.Fatalf("sample for %d of %d sys schemas", len(good), len(schemas.SysNames()))
	}
	for name, js := range good {
		t.Run(name, func(t *testing.T) {
			b, err := r.FromJSON(name, []byte(js))
			if err != nil {
				t.Fatal(err)
			}
			if err := r.Validate(name, b); err != nil {
				t.Fatal(err)
			}
			back, err := schemas.ToJSON(b)
			if err != nil {
				t.Fatal(err)
			}
			again, err := r.FromJSON(name, back)
			if err != nil || string(again) != string(b) {
				t.Fatalf("round trip: %x vs %x (%v)", again, b, err)
			}
		})
	}
	bad := []struct{ name, js, ptr string }{
		{"sys/WorkflowContext@1", strings.Replace(good["sys/WorkflowContext@1"], b64(32), b64(31), 1), "/entropy"},
		{"sys/WorkflowContext@1", strings.Replace(good["sys/WorkflowContext@1"], `"now_ns":1`, `"now_ns":-1`, 1), "/now_ns"},
		{"sys/EffectReceiptEnvelope@1", strings.Replace(good["sys/EffectReceiptEnvelope@1"], `"ok"`, `"done"`, 1), "/status"},
		{"sys/BlobGetParams@1", `{"blob_ref":"sha256:abc"}`, "/blob_ref"},
		{"sys/BlobPutParams@1", `{"bytes":"aGk=","extra":1}`, "/"},
		{"sys/TimerSetParams@1", `{}`, "/"},
		{"sys/HttpRequestParams@2", `{"method":"GET","url":"u","retry":{"max_attempts":21}}`, "/retry/max_attempts"},
		{"sys/HttpRequestParams@2", `{"method":"GET","url":"u","retry":{"max_attempts":0}}`, "/retry/max_attempts"},
		{"sys/HttpRequestParams@2", `{"method":"GET","url":"u","retry":{"retry_statuses":[99]}}`, "/retry/retry_statuses/0"},
		{"sys/HttpRequestParams@2", `{"method":"GET","url":"u","retry":{"jitter":true}}`, "/retry"},
		{"sys/HttpRequestReceipt@2", `{"status":200,"headers":{},"body":""}`, "/"},
	}
	for _, c := range bad {
		_, err := r.FromJSON(c.name, []byte(c.js))
		var ve *schemas.ValueError
		if !errors.As(err, &ve) || ve.Pointer != c.ptr {
			t.Errorf("%s %s: got %v, want error at %s", c.name, c.js, err, c.ptr)
		}
	}
	for _, n := range []int{33, 34, 35, 100} {
		js := strings.Replace(good["sys/WorkflowContext@1"], b64(32), b64(n), 1)
		if _, err := r.FromJSON("sys/WorkflowContext@1", []byte(js)); err != nil {
			t.Errorf("entropy of %d bytes refused: %v", n, err)
		}
	}
	src := schemas.SysSchemaJSON()
	if len(src) != len(good) || !schemas.IsSysName("sys/X@1") || schemas.IsSysName("com.acme/X@1") {
		t.Fatal("SysSchemaJSON / IsSysName")
	}
}

func TestCheckName(t *testing.T) {
	for _, n := range []string{"com.acme/OrderId@1", "sys/timer.set@1", "a/b@12", "x-y/z_w@3"} {
		if err := schemas.CheckName(n); err != nil {
			t.Errorf("%s: %v", n, err)
		}
	}
	for _, n := range []string{"", "a/b", "a/b@0", "a/b@01", "a@1", "a/b/c@1", "/b@1", "a/@1", "a/b@1x", "a b/c@1", "a/b@-1"} {
		if schemas.CheckName(n) == nil {
			t.Errorf("%q accepted", n)
		}
	}
}

// TestConcurrentReads runs readers against a registry while Define publishes
// new batches; run with -race.
func TestConcurrentReads(t *testing.T) {
	r := testRegistry(t)
	good, err := r.FromJSON("t/Rec@1", []byte(`{"id":"x","blob":"AAEC","list":["AA=="]}`))
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				if err := r.Validate("t/Rec@1", good); err != nil {
					t.Error(err)
					return
				}
				b, err := r.FromJSON("t/Rec@1", []byte(`{"id":"x","blob":"AAEC","list":["AA=="]}`))
				if err != nil || string(b) != string(good) {
					t.Error("FromJSON differs under concurrency", err)
					return
				}
				_ = r.Names()
			}
		}()
	}
	for i := 0; i < 20; i++ {
		if err := r.Define([]schemas.SchemaDef{{Name: fmt.Sprintf("t/Extra@%d", i+1), Schema: []byte(`{"$ref":"t/Rec@1"}`)}}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}
