package receipts_test

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

func TestJSONRoundTrip(t *testing.T) {
	a := testKey("a")
	k := ring(t, "timer", a)
	withBytes := sampleReceipt()
	withBytes.Payload = schemas.MustMarshal(map[string]any{"bytes": []byte{1, 2, 3}, "size": uint64(3)})
	noRef := sampleReceipt()
	noRef.IssuerRef = ""
	for name, r := range map[string]receipts.Receipt{
		"json payload":  sampleReceipt(),
		"bytes payload": withBytes,
		"no issuer_ref": noRef,
	} {
		t.Run(name, func(t *testing.T) {
			sr := receipts.Sign(a, r)
			js, err := receipts.ToJSON(sr)
			if err != nil {
				t.Fatal(err)
			}
			got, err := receipts.FromJSON(js)
			if err != nil {
				t.Fatalf("%s: %v", js, err)
			}
			if !bytes.Equal(got.Marshal(), sr.Marshal()) {
				t.Fatalf("round trip differs: %s", js)
			}
			if _, err := k.Verify(got); err != nil {
				t.Fatal(err)
			}
			js2, _ := receipts.ToJSON(got)
			if !bytes.Equal(js, js2) {
				t.Fatal("ToJSON not stable")
			}
		})
	}
	js, _ := receipts.ToJSON(receipts.Sign(a, sampleReceipt()))
	if !bytes.Contains(js, []byte(`"payload":{"delivered_at_ns":42,"key":"k"}`)) {
		t.Fatalf("payload not shown as JSON: %s", js)
	}
	js, _ = receipts.ToJSON(receipts.Sign(a, withBytes))
	if !bytes.Contains(js, []byte(`"payload_cbor":"`)) || bytes.Contains(js, []byte(`"payload":`)) {
		t.Fatalf("byte-string payload not as payload_cbor: %s", js)
	}
}

// A payload given as a JSON value is signed over its canonical CBOR, so an
// executor may spell numbers and order keys as it likes.
func TestJSONPayloadCanonicalized(t *testing.T) {
	a := testKey("a")
	k := ring(t, "timer", a)
	r := sampleReceipt()
	r.Payload = schemas.MustMarshal(map[string]any{"n": uint64(1), "f": 1.5, "list": []any{"x", nil, true}})
	sr := receipts.Sign(a, r)
	js, _ := receipts.ToJSON(sr)
	spelled := strings.Replace(string(js), `"payload":{"f":1.5,"list":["x",null,true],"n":1}`, `"payload":{"n":1.0e0,"list":["x",null,true],"f":15e-1}`, 1)
	if spelled == string(js) {
		t.Fatalf("test setup: %s", js)
	}
	got, err := receipts.FromJSON([]byte(spelled))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.Verify(got); err != nil {
		t.Fatalf("respelled payload: %v", err)
	}
}

func TestFromJSONStrict(t *testing.T) {
	a := testKey("a")
	good, _ := receipts.ToJSON(receipts.Sign(a, sampleReceipt()))
	edit := func(old, new string) string {
		s := strings.Replace(string(good), old, new, 1)
		if s == string(good) {
			t.Fatalf("edit %q not applied", old)
		}
		return s
	}
	cases := map[string]string{
		"not json":          `{`,
		"not object":        `[]`,
		"unknown field":     edit(`"attempt":1`, `"attempt":1,"extra":true`),
		"duplicate field":   edit(`"attempt":1`, `"attempt":1,"attempt":1`),
		"missing status":    edit(`,"status":"ok"`, ``),
		"bad status":        edit(`"status":"ok"`, `"status":"OK"`),
		"bad intent":        edit(`"intent_hash":"sha256:`, `"intent_hash":"sha1:`),
		"zero intent":       strings.Replace(string(good), schemas.HashBytes([]byte("intent-1")).String(), (schemas.Hash{}).String(), 1),
		"attempt negative":  edit(`"attempt":1`, `"attempt":-1`),
		"attempt float":     edit(`"attempt":1`, `"attempt":1.5`),
		"attempt string":    edit(`"attempt":1`, `"attempt":"1"`),
		"both payloads":     edit(`"payload":{`, `"payload_cbor":"AQ==","payload":{`),
		"no payload":        edit(`"payload":{"delivered_at_ns":42,"key":"k"},`, ``),
		"payload_cbor bad":  edit(`"payload":{"delivered_at_ns":42,"key":"k"}`, `"payload_cbor":"GAE="`), // 0x18 0x01: non-canonical 1
		"payload_cbor b64":  edit(`"payload":{"delivered_at_ns":42,"key":"k"}`, `"payload_cbor":"AQ"`),
		"signature b64":     edit(`"signature":"`, `"signature":"*`),
		"short signature":   edit(`"signature":"`, `"signature":"AAAA`),
		"key id":            edit(`"key_id":"ed25519:`, `"key_id":"rsa:`),
		"effect not string": edit(`"effect":"com.test/timer.set@1"`, `"effect":1`),
		"trailing":          string(good) + `{}`,
		"huge number":       edit(`"delivered_at_ns":42`, `"delivered_at_ns":1e999`),
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := receipts.FromJSON([]byte(in))
			if !errors.Is(err, receipts.ErrMalformed) {
				t.Fatalf("got %v, want ErrMalformed", err)
			}
		})
	}
}

func FuzzFromJSON(f *testing.F) {
	a := testKey("a")
	withBytes := sampleReceipt()
	withBytes.Payload = schemas.MustMarshal([]any{[]byte{1}, -5, 2.5})
	for _, r := range []receipts.Receipt{sampleReceipt(), withBytes} {
		js, _ := receipts.ToJSON(receipts.Sign(a, r))
		f.Add(js)
	}
	f.Add([]byte(`{"payload":1e400}`))
	f.Add([]byte(`{"intent_hash":"sha256:","payload_cbor":"","payload":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		sr, err := receipts.FromJSON(data)
		if err != nil {
			if !errors.Is(err, receipts.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if err := sr.Check(); err != nil {
			t.Fatalf("accepted a receipt that fails Check: %v", err)
		}
		js, err := receipts.ToJSON(sr)
		if err != nil {
			t.Fatal(err)
		}
		again, err := receipts.FromJSON(js)
		if err != nil {
			t.Fatalf("re-encoded receipt refused: %v\n%s", err, js)
		}
		if !bytes.Equal(again.Marshal(), sr.Marshal()) {
			t.Fatalf("re-encoding changed the receipt:\n%s", js)
		}
		js2, _ := receipts.ToJSON(again)
		if !bytes.Equal(js, js2) {
			t.Fatalf("ToJSON not stable:\n%s\n%s", js, js2)
		}
		if _, err := receipts.Unmarshal(sr.Marshal()); err != nil {
			t.Fatalf("cbor form refused: %v", err)
		}
	})
}

func FuzzUnmarshal(f *testing.F) {
	sr := receipts.Sign(testKey("a"), sampleReceipt())
	f.Add(sr.Marshal())
	f.Add([]byte{0xa0})
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := receipts.Unmarshal(data)
		if err != nil {
			if !errors.Is(err, receipts.ErrMalformed) {
				t.Fatalf("error does not wrap ErrMalformed: %v", err)
			}
			return
		}
		if !bytes.Equal(got.Marshal(), data) {
			t.Fatal("accepted bytes that do not re-encode identically")
		}
	})
}
