package schemas_test

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math"
	"math/big"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/schemas"
)

// fastDefs exercise every keyword of the fast path's subset, and some it
// refuses (the noPlan list).
var fastDefs = []schemas.SchemaDef{
	{Name: "ft/Str@1", Schema: []byte(`{"type":"string","minLength":2,"maxLength":4}`)},
	{Name: "ft/Pat@1", Schema: []byte(`{"type":"string","pattern":"^[a-c]+$"}`)},
	{Name: "ft/Bytes@1", Schema: []byte(`{"type":"string","contentEncoding":"base64","minLength":4,"maxLength":8}`)},
	{Name: "ft/BytesPat@1", Schema: []byte(`{"type":"string","contentEncoding":"base64","pattern":"^AA"}`)},
	{Name: "ft/Int@1", Schema: []byte(`{"type":"integer","minimum":-5,"exclusiveMaximum":10}`)},
	{Name: "ft/Big@1", Schema: []byte(`{"type":"integer","minimum":-18446744073709551616,"maximum":18446744073709551615}`)},
	{Name: "ft/Edge@1", Schema: []byte(`{"type":"integer","exclusiveMinimum":-9223372036854775809,"maximum":9223372036854775808}`)},
	{Name: "ft/Num@1", Schema: []byte(`{"type":"number","maximum":100,"exclusiveMinimum":-1}`)},
	{Name: "ft/Types@1", Schema: []byte(`{"type":["string","null","boolean"]}`)},
	{Name: "ft/Enum@1", Schema: []byte(`{"enum":["a",1,-2,true,null,1.5,{"x":1},[1],"18446744073709551615",18446744073709551615,1e1]}`)},
	{Name: "ft/Const@1", Schema: []byte(`{"const":"k"}`)},
	{Name: "ft/ConstInt@1", Schema: []byte(`{"const":-7}`)},
	{Name: "ft/ConstObj@1", Schema: []byte(`{"const":{"a":1}}`)},
	{Name: "ft/ConstNull@1", Schema: []byte(`{"const":null}`)},
	{Name: "ft/Obj@1", Schema: []byte(`{"type":"object","required":["a","zz","q"],"minProperties":3,"maxProperties":6,
		"properties":{"a":{"type":"integer"},"b":{"$ref":"ft/Bytes@1"},"zz":{"type":"string"},"nested":{"$ref":"#/$defs/n"}},
		"additionalProperties":{"type":"boolean"},
		"$defs":{"n":{"type":"object","properties":{"k":{"$ref":"ft/Int@1"}},"additionalProperties":false}}}`)},
	{Name: "ft/Closed@1", Schema: []byte(`{"type":"object","properties":{"a":true,"b":false,"c":{}},"additionalProperties":false}`)},
	{Name: "ft/Open@1", Schema: []byte(`{"properties":{"a":{"type":"string"}}}`)},
	{Name: "ft/Arr@1", Schema: []byte(`{"type":"array","items":{"$ref":"ft/Bytes@1"},"minItems":1,"maxItems":3}`)},
	{Name: "ft/Tree@1", Schema: []byte(`{"type":"object","required":["v"],"properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#"}}}}`)},
	{Name: "ft/D7@1", Schema: []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object",
		"properties":{"xs":{"type":"array","items":{"type":"string","contentEncoding":"base64"}},"r":{"$ref":"#/definitions/r"}},
		"definitions":{"r":{"type":"integer","minimum":0,"exclusiveMaximum":3}}}`)},
	{Name: "ft/D4@1", Schema: []byte(`{"$schema":"http://json-schema.org/draft-04/schema#","type":"integer","minimum":0,"exclusiveMinimum":true}`)},
	{Name: "ft/Unicode@1", Schema: []byte(`{"type":"string","minLength":3,"maxLength":3}`)},
	{Name: "ft/Any@1", Schema: []byte(`{}`)},
	{Name: "ft/True@1", Schema: []byte(`true`)},
	{Name: "ft/False@1", Schema: []byte(`false`)},
	{Name: "ft/Alias@1", Schema: []byte(`{"$ref":"ft/Alias2@1"}`)},
	{Name: "ft/Alias2@1", Schema: []byte(`{"$ref":"ft/Bytes@1#"}`)},
	{Name: "ft/Var@1", Variant: []schemas.Arm{{Tag: "B", Schema: "ft/Bytes@1"}, {Tag: "O", Schema: "ft/Obj@1"}, {Tag: "T", Schema: "ft/Tree@1"}, {Tag: "N", Schema: "ft/Int@1"}}},
	{Name: "ft/VarList@1", Schema: []byte(`{"type":"array","items":{"$ref":"ft/Var@1"}}`)},
	{Name: "ft/VarSelf@1", Variant: []schemas.Arm{{Tag: "leaf", Schema: "ft/Int@1"}, {Tag: "more", Schema: "ft/VarSelfList@1"}}},
	{Name: "ft/VarSelfList@1", Schema: []byte(`{"type":"array","items":{"$ref":"ft/VarSelf@1"}}`)},
	// Keywords outside the subset: no plan.
	{Name: "ft/Fmt@1", Schema: []byte(`{"type":"string","format":"email"}`)},
	{Name: "ft/OneOf@1", Schema: []byte(`{"oneOf":[{"type":"string"},{"type":"integer"}]}`)},
	{Name: "ft/AnyOf@1", Schema: []byte(`{"anyOf":[{"type":"string"},{"type":"integer"}]}`)},
	{Name: "ft/AllOf@1", Schema: []byte(`{"allOf":[{"type":"string"}]}`)},
	{Name: "ft/PatProps@1", Schema: []byte(`{"patternProperties":{"^a":{"type":"string"}}}`)},
	{Name: "ft/Mult@1", Schema: []byte(`{"type":"integer","multipleOf":2}`)},
	{Name: "ft/Uniq@1", Schema: []byte(`{"type":"array","uniqueItems":true}`)},
	{Name: "ft/IfThen@1", Schema: []byte(`{"if":{"type":"string"},"then":{"minLength":2}}`)},
	{Name: "ft/DepReq@1", Schema: []byte(`{"dependentRequired":{"a":["b"]}}`)},
	{Name: "ft/Prefix@1", Schema: []byte(`{"prefixItems":[{"type":"string"}]}`)},
	{Name: "ft/Tuple7@1", Schema: []byte(`{"$schema":"http://json-schema.org/draft-07/schema#","items":[{"type":"string"}]}`)},
	{Name: "ft/Frac@1", Schema: []byte(`{"type":"integer","minimum":0.5}`)},
	{Name: "ft/Huge@1", Schema: []byte(`{"type":"integer","maximum":1e30}`)},
	{Name: "ft/Contains@1", Schema: []byte(`{"contains":{"type":"string"}}`)},
	{Name: "ft/Not@1", Schema: []byte(`{"not":{"type":"string"}}`)},
	{Name: "ft/Uneval@1", Schema: []byte(`{"unevaluatedProperties":false}`)},
	{Name: "ft/PropNames@1", Schema: []byte(`{"propertyNames":{"maxLength":2}}`)},
	{Name: "ft/Media@1", Schema: []byte(`{"type":"string","contentMediaType":"application/json"}`)},
	{Name: "ft/RefSib@1", Schema: []byte(`{"$ref":"ft/Int@1","maximum":3}`)},
	{Name: "ft/DeepBad@1", Schema: []byte(`{"properties":{"a":{"items":{"properties":{"b":{"format":"date"}}}}}}`)},
	{Name: "ft/VarBad@1", Variant: []schemas.Arm{{Tag: "x", Schema: "ft/Int@1"}, {Tag: "y", Schema: "ft/Fmt@1"}}},
}

var noPlan = []string{"ft/Fmt@1", "ft/OneOf@1", "ft/AnyOf@1", "ft/AllOf@1", "ft/PatProps@1", "ft/Mult@1", "ft/Uniq@1",
	"ft/IfThen@1", "ft/DepReq@1", "ft/Prefix@1", "ft/Tuple7@1", "ft/Frac@1", "ft/Huge@1", "ft/Contains@1", "ft/Not@1",
	"ft/Uneval@1", "ft/PropNames@1", "ft/Media@1", "ft/RefSib@1", "ft/DeepBad@1", "ft/VarBad@1"}

func fastRegistry(t testing.TB) *schemas.Registry {
	t.Helper()
	r := schemas.NewRegistry()
	if err := r.Define([]schemas.SchemaDef{{Name: "bench/OrderPlaced@1", Schema: []byte(benchSchema)}}); err != nil {
		t.Fatal(err)
	}
	if err := r.Define(fastDefs); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestFastPlanCoverage(t *testing.T) {
	r := fastRegistry(t)
	refused := map[string]bool{}
	for _, n := range noPlan {
		refused[n] = true
		if schemas.HasFastPlan(r, n) {
			t.Errorf("%s has a fast plan, want none", n)
		}
	}
	for _, n := range r.Names() {
		if !refused[n] && !schemas.HasFastPlan(r, n) {
			t.Errorf("%s has no fast plan", n)
		}
	}
	// A plan survives redefinition batches that reference earlier defs.
	if err := r.Define([]schemas.SchemaDef{{Name: "ft/Later@1", Schema: []byte(`{"type":"array","items":{"$ref":"ft/Var@1"}}`)}}); err != nil {
		t.Fatal(err)
	}
	if !schemas.HasFastPlan(r, "ft/Later@1") {
		t.Error("ft/Later@1 has no fast plan")
	}
}

type obj = map[string]any

type fastCase struct {
	schema string
	v      any  // encoded with schemas.Marshal; []byte values become byte strings
	valid  bool // what the general path says
	unsure bool // a valid value the fast path leaves to the general path
}

func bigInt(s string) *big.Int {
	i, ok := new(big.Int).SetString(s, 10)
	if !ok {
		panic(s)
	}
	return i
}

var fastCases = []fastCase{
	{"ft/Str@1", "ab", true, false},
	{"ft/Str@1", "abcd", true, false},
	{"ft/Str@1", "a", false, false},
	{"ft/Str@1", "abcde", false, false},
	{"ft/Str@1", "éé", true, false},
	{"ft/Str@1", "😀😀😀😀", true, false},
	{"ft/Str@1", "😀😀😀😀😀", false, false},
	{"ft/Str@1", []byte("ab"), false, false},
	{"ft/Str@1", uint64(12), false, false},
	{"ft/Pat@1", "abc", true, false},
	{"ft/Pat@1", "abd", false, false},
	{"ft/Pat@1", "", false, false},
	{"ft/Bytes@1", []byte{1}, true, false},
	{"ft/Bytes@1", []byte{1, 2, 3, 4, 5, 6}, true, false},
	{"ft/Bytes@1", []byte{}, false, false},
	{"ft/Bytes@1", []byte{1, 2, 3, 4, 5, 6, 7}, false, false},
	{"ft/Bytes@1", "AQ==", false, false},
	{"ft/BytesPat@1", []byte{0, 1}, true, false},
	{"ft/BytesPat@1", []byte{1, 1}, false, false},
	{"ft/BytesPat@1", "AAAA", false, false},
	{"ft/Int@1", int64(-5), true, false},
	{"ft/Int@1", int64(-6), false, false},
	{"ft/Int@1", uint64(9), true, false},
	{"ft/Int@1", uint64(10), false, false},
	{"ft/Int@1", uint64(0), true, false},
	{"ft/Int@1", 2.5, false, false},
	{"ft/Int@1", "1", false, false},
	{"ft/Big@1", uint64(math.MaxUint64), true, false},
	{"ft/Big@1", bigInt("-18446744073709551616"), true, false},
	{"ft/Big@1", bigInt("-9223372036854775809"), true, false},
	{"ft/Big@1", int64(math.MinInt64), true, false},
	{"ft/Big@1", 1e300, false, false},
	{"ft/Edge@1", bigInt("-9223372036854775809"), false, false},
	{"ft/Edge@1", int64(math.MinInt64), true, false},
	{"ft/Edge@1", uint64(1 << 63), true, false},
	{"ft/Edge@1", uint64(1<<63 + 1), false, false},
	{"ft/Edge@1", bigInt("-18446744073709551616"), false, false},
	{"ft/Num@1", uint64(100), true, false},
	{"ft/Num@1", uint64(101), false, false},
	{"ft/Num@1", int64(-1), false, false},
	{"ft/Num@1", uint64(0), true, false},
	{"ft/Num@1", 99.5, true, true},
	{"ft/Types@1", "x", true, false},
	{"ft/Types@1", nil, true, false},
	{"ft/Types@1", false, true, false},
	{"ft/Types@1", uint64(1), false, false},
	{"ft/Types@1", []any{}, false, false},
	{"ft/Types@1", obj{}, false, false},
	{"ft/Types@1", []byte{}, false, false},
	{"ft/Enum@1", "a", true, false},
	{"ft/Enum@1", uint64(1), true, false},
	{"ft/Enum@1", int64(-2), true, false},
	{"ft/Enum@1", uint64(10), true, false},
	{"ft/Enum@1", uint64(math.MaxUint64), true, false},
	{"ft/Enum@1", "18446744073709551615", true, false},
	{"ft/Enum@1", true, true, false},
	{"ft/Enum@1", false, false, false},
	{"ft/Enum@1", nil, true, false},
	{"ft/Enum@1", 1.5, true, true},
	{"ft/Enum@1", obj{"x": uint64(1)}, true, true},
	{"ft/Enum@1", []any{uint64(1)}, true, true},
	{"ft/Enum@1", "b", false, false},
	{"ft/Enum@1", uint64(2), false, false},
	{"ft/Enum@1", int64(-1), false, false},
	{"ft/Enum@1", []byte("a"), false, false},
	{"ft/Const@1", "k", true, false},
	{"ft/Const@1", "K", false, false},
	{"ft/Const@1", []byte("k"), false, false},
	{"ft/ConstInt@1", int64(-7), true, false},
	{"ft/ConstInt@1", uint64(7), false, false},
	{"ft/ConstObj@1", obj{"a": uint64(1)}, true, true},
	{"ft/ConstObj@1", obj{"a": uint64(2)}, false, false},
	{"ft/ConstNull@1", nil, true, false},
	{"ft/ConstNull@1", false, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": "s", "q": true}, true, false},
	{"ft/Obj@1", obj{"a": int64(-1), "zz": "", "q": false, "b": []byte{1, 2}, "nested": obj{"k": uint64(3)}, "other": true}, true, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": "s", "q": true, "nested": obj{"k": uint64(30)}}, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": "s", "q": true, "nested": obj{"j": uint64(3)}}, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": "s", "q": uint64(1)}, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": "s"}, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "q": true}, false, false},
	{"ft/Obj@1", obj{"a": "1", "zz": "s", "q": true}, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": "s", "q": true, "b": "AQI="}, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": []byte("s"), "q": true}, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": "s", "q": true, "x": true, "y": true, "z": true, "w": true}, false, false},
	{"ft/Obj@1", obj{"a": uint64(1), "zz": "s", "q": true, "x": []byte{1}}, false, false},
	{"ft/Obj@1", []any{}, false, false},
	{"ft/Closed@1", obj{}, true, false},
	{"ft/Closed@1", obj{"a": []any{"x", obj{"y": nil}}, "c": uint64(1)}, true, false},
	{"ft/Closed@1", obj{"b": uint64(1)}, false, false},
	{"ft/Closed@1", obj{"d": uint64(1)}, false, false},
	{"ft/Closed@1", obj{"a": []byte{1}}, false, false},
	{"ft/Closed@1", obj{"a": obj{"z": []byte{1}}}, false, false},
	{"ft/Closed@1", obj{"a": 0.5}, true, true},
	{"ft/Open@1", obj{"a": "x", "b": obj{"c": []any{uint64(1), "y"}}}, true, false},
	{"ft/Open@1", "not an object", true, false},
	{"ft/Open@1", obj{"a": uint64(1)}, false, false},
	{"ft/Open@1", obj{"b": []byte{}}, false, false},
	{"ft/Arr@1", []any{[]byte{1}}, true, false},
	{"ft/Arr@1", []any{[]byte{1}, []byte{2, 3}, []byte{4, 5, 6, 7}}, true, false},
	{"ft/Arr@1", []any{}, false, false},
	{"ft/Arr@1", []any{[]byte{1}, []byte{1}, []byte{1}, []byte{1}}, false, false},
	{"ft/Arr@1", []any{"AQ=="}, false, false},
	{"ft/Arr@1", []any{[]byte{}}, false, false},
	{"ft/Tree@1", obj{"v": uint64(1), "kids": []any{obj{"v": uint64(2)}, obj{"v": int64(-3), "kids": []any{}}}}, true, false},
	{"ft/Tree@1", obj{"v": uint64(1), "kids": []any{obj{"w": uint64(2)}}}, false, false},
	{"ft/Tree@1", obj{"v": uint64(1), "kids": []any{obj{"v": uint64(2), "kids": []any{uint64(3)}}}}, false, false},
	{"ft/D7@1", obj{"xs": []any{[]byte{}, []byte{1}}, "r": uint64(2)}, true, false},
	{"ft/D7@1", obj{"xs": []any{"x"}}, false, false},
	{"ft/D7@1", obj{"r": uint64(3)}, false, false},
	{"ft/D4@1", uint64(1), true, false},
	{"ft/D4@1", uint64(0), false, false},
	{"ft/Unicode@1", "héé", true, false},
	{"ft/Unicode@1", "abc", true, false},
	{"ft/Unicode@1", "ab", false, false},
	{"ft/Unicode@1", "éééé", false, false},
	{"ft/Any@1", obj{"a": []any{uint64(1), int64(-1), "x", nil, true, obj{}}}, true, false},
	{"ft/Any@1", bigInt("-18446744073709551616"), true, false},
	{"ft/Any@1", []byte{1}, false, false},
	{"ft/Any@1", obj{"a": []any{[]byte{1}}}, false, false},
	{"ft/Any@1", 0.25, true, true},
	{"ft/True@1", obj{"a": "b"}, true, false},
	{"ft/True@1", []byte{}, false, false},
	{"ft/False@1", nil, false, false},
	{"ft/False@1", uint64(0), false, false},
	{"ft/Alias@1", []byte{1, 2}, true, false},
	{"ft/Alias@1", []byte{}, false, false},
	{"ft/Alias@1", "AQI=", false, false},
	{"ft/Var@1", obj{"$tag": "B", "$value": []byte{1, 2}}, true, false},
	{"ft/Var@1", obj{"$tag": "N", "$value": uint64(3)}, true, false},
	{"ft/Var@1", obj{"$tag": "O", "$value": obj{"a": uint64(1), "zz": "s", "q": true, "b": []byte{9}}}, true, false},
	{"ft/Var@1", obj{"$tag": "T", "$value": obj{"v": uint64(1), "kids": []any{obj{"v": uint64(2)}}}}, true, false},
	{"ft/Var@1", obj{"$tag": "B", "$value": "AQI="}, false, false},
	{"ft/Var@1", obj{"$tag": "N", "$value": uint64(30)}, false, false},
	{"ft/Var@1", obj{"$tag": "N", "$value": []byte{1}}, false, false},
	{"ft/Var@1", obj{"$tag": "B", "$value": uint64(3)}, false, false},
	{"ft/Var@1", obj{"$tag": "X", "$value": uint64(3)}, false, false},
	{"ft/Var@1", obj{"$tag": []byte("N"), "$value": uint64(3)}, false, false},
	{"ft/Var@1", obj{"$tag": "N"}, false, false},
	{"ft/Var@1", obj{"$value": uint64(3)}, false, false},
	{"ft/Var@1", obj{"$tag": "N", "$value": uint64(3), "x": nil}, false, false},
	{"ft/Var@1", obj{"$tag": "N", "$value": uint64(3), "$valuf": nil}, false, false},
	{"ft/Var@1", obj{"$tag": "N", "$value": uint64(3), "$a": nil}, false, false},
	{"ft/Var@1", "N", false, false},
	{"ft/VarList@1", []any{obj{"$tag": "N", "$value": uint64(1)}, obj{"$tag": "B", "$value": []byte{1}}}, true, false},
	{"ft/VarList@1", []any{obj{"$tag": "N", "$value": uint64(1)}, obj{"$tag": "B", "$value": []byte{}}}, false, false},
	{"ft/VarSelf@1", obj{"$tag": "more", "$value": []any{obj{"$tag": "leaf", "$value": uint64(1)}, obj{"$tag": "more", "$value": []any{}}}}, true, false},
	{"ft/VarSelf@1", obj{"$tag": "more", "$value": []any{obj{"$tag": "leaf", "$value": uint64(11)}}}, false, false},
	{"ft/OneOf@1", "x", true, true},
	{"ft/Fmt@1", "a@b.c", true, true},
	{"ft/Fmt@1", "nope", false, false},
	{"ft/RefSib@1", uint64(3), true, true},
	{"ft/RefSib@1", uint64(4), false, false},
	{"ft/VarBad@1", obj{"$tag": "x", "$value": uint64(1)}, true, true},
	{"bench/OrderPlaced@1", obj{"order_id": "o", "items": []any{}, "total": uint64(0)}, true, false},
	{"bench/OrderPlaced@1", obj{"order_id": "o", "items": []any{obj{"sku": "s", "qty": uint64(1), "price": uint64(0)}}, "total": uint64(5),
		"currency": "EUR", "note": strings.Repeat("é", 200), "placed_at_ns": uint64(1), "payload": []byte{}}, true, false},
	{"bench/OrderPlaced@1", obj{"order_id": "o", "items": []any{}, "total": uint64(0), "note": strings.Repeat("é", 201)}, false, false},
	{"bench/OrderPlaced@1", obj{"order_id": "o", "items": []any{obj{"sku": "s", "qty": uint64(0)}}, "total": uint64(0)}, false, false},
	{"bench/OrderPlaced@1", obj{"order_id": "o", "items": []any{}, "total": uint64(0), "currency": "GBP"}, false, false},
	{"bench/OrderPlaced@1", obj{"order_id": "", "items": []any{}, "total": uint64(0)}, false, false},
	{"bench/OrderPlaced@1", obj{"order_id": "o", "items": []any{}, "total": int64(-1)}, false, false},
	{"bench/OrderPlaced@1", obj{"order_id": "o", "items": []any{}, "total": uint64(0), "extra": nil}, false, false},
}

// validJSON are valid values (written as FromJSON input) the fast path must accept.
var validJSON = []struct{ schema, js string }{
	{"bench/OrderPlaced@1", benchEventJSON},
	{"sys/WorkflowContext@1", `{"now_ns":1732320000000000000,"logical_now_ns":1732320000000000000,"entropy":"` + b64(32) +
		`","journal_height":123456,"event_hash":` + h0 + `,"manifest_hash":` + h0 + `,"workflow":"com.acme/order.step@1","workflow_hash":` + h0 +
		`,"key":"b3JkLTE=","cell_mode":true}`},
	{"sys/WorkflowContext@1", `{"now_ns":1,"logical_now_ns":2,"entropy":"` + b64(45) + `","journal_height":3,"event_hash":` + h0 +
		`,"manifest_hash":` + h0 + `,"workflow":"w","workflow_hash":` + h0 + `,"cell_mode":false}`},
	{"sys/EffectReceiptEnvelope@1", `{"origin_workflow":"a/b@1","origin_workflow_hash":` + h0 + `,"intent_hash":` + h0 +
		`,"effect":"sys/timer.set@1","executor":"timer","payload":"","status":"ok","emitted_at_seq":9,"signature":"` + b64(64) + `"}`},
	{"sys/EffectReceiptEnvelope@1", `{"origin_workflow":"a/b@1","origin_workflow_hash":` + h0 + `,"origin_key":"AQ==","intent_hash":` + h0 +
		`,"effect":"e","executor":"x","issuer_ref":"","payload":"` + b64(100) + `","status":"timeout","emitted_at_seq":0,"signature":""}`},
	{"sys/HttpRequestParams@1", `{"method":"GET","url":"u","body":"aGk=","headers":{"a":"b","content-type":"text/plain"}}`},
	{"sys/BlobGetReceipt@1", `{"bytes":"` + b64(1000) + `","size":1000}`},
}

// checkFast asserts the fast path's one promise on data: valid only if the
// general path accepts. It returns both verdicts.
func checkFast(t *testing.T, r *schemas.Registry, name string, data []byte) (fast bool, slow error) {
	t.Helper()
	fast = schemas.FastValid(r, name, data)
	slow = schemas.ValidateSlow(r, name, data)
	if fast && slow != nil {
		t.Fatalf("%s: fast path accepts %x, general path says %v", name, data, slow)
	}
	// Messages are not compared: with several problems the general path
	// picks the first one in Go's map order. It is the same code either way.
	if got := r.Validate(name, data); (got == nil) != (slow == nil) {
		t.Fatalf("%s: Validate(%x) = %v, general path %v", name, data, got, slow)
	}
	return fast, slow
}

func TestFastPathCases(t *testing.T) {
	r := fastRegistry(t)
	for i, c := range fastCases {
		data, err := schemas.Marshal(c.v)
		if err != nil {
			t.Fatalf("case %d: marshal: %v", i, err)
		}
		fast, slow := checkFast(t, r, c.schema, data)
		if (slow == nil) != c.valid {
			t.Errorf("case %d %s %x: general path says %v, want valid=%v", i, c.schema, data, slow, c.valid)
		}
		if want := c.valid && !c.unsure; fast != want {
			t.Errorf("case %d %s %x: fast path says %v, want %v", i, c.schema, data, fast, want)
		}
	}
	for _, c := range validJSON {
		data, err := r.FromJSON(c.schema, []byte(c.js))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		if fast, _ := checkFast(t, r, c.schema, data); !fast {
			t.Errorf("%s: fast path is unsure of valid %x", c.schema, data)
		}
	}
}

// TestFastPathHex pins hand-written encodings, most of them not canonical.
func TestFastPathHex(t *testing.T) {
	r := fastRegistry(t)
	cases := []struct {
		schema, hex string
		fast        bool
	}{
		{"ft/Any@1", "00", true},
		{"ft/Any@1", "1817", false},                 // 23 in two bytes
		{"ft/Any@1", "190017", false},               // 23 in three bytes
		{"ft/Any@1", "1a000000ff", false},           // 255 in five bytes
		{"ft/Any@1", "1b00000000ffffffff", false},   // 2^32-1 in nine bytes
		{"ft/Any@1", "1b0000000100000000", true},    // 2^32
		{"ft/Any@1", "3bffffffffffffffff", true},    // -2^64
		{"ft/Any@1", "3b8000000000000000", true},    // -2^63-1
		{"ft/Any@1", "1c", false},                   // reserved
		{"ft/Any@1", "1b00", false},                 // truncated
		{"ft/Any@1", "", false},                     // empty
		{"ft/Any@1", "0000", false},                 // trailing byte
		{"ft/Any@1", "9f01ff", false},               // indefinite array
		{"ft/Any@1", "bf616101ff", false},           // indefinite map
		{"ft/Any@1", "7f6161ff", false},             // indefinite text
		{"ft/Any@1", "980101", false},               // array length in two bytes
		{"ft/Any@1", "a2616102616101", false},       // unsorted keys
		{"ft/Any@1", "a2616101616102", false},       // duplicate keys
		{"ft/Any@1", "a2616101616202", true},        // sorted
		{"ft/Any@1", "a2626161016162", false},       // longer key first (and truncated)
		{"ft/Any@1", "a26162016261610102", false},   // longer key first
		{"ft/Any@1", "a10101", false},               // integer key
		{"ft/Any@1", "a1410101", false},             // byte-string key
		{"ft/Any@1", "62c328", false},               // invalid UTF-8
		{"ft/Any@1", "63eda080", false},             // UTF-8 surrogate
		{"ft/Any@1", "a162c32801", false},           // invalid UTF-8 key
		{"ft/Any@1", "c11a00000000", false},         // tag
		{"ft/Any@1", "f7", false},                   // undefined
		{"ft/Any@1", "f0", false},                   // simple value 16
		{"ft/Any@1", "f820", false},                 // simple value 32
		{"ft/Any@1", "f93e00", false},               // float: always left to the general path
		{"ft/Any@1", "f4", true},                    // false
		{"ft/Any@1", "ff", false},                   // break
		{"ft/Any@1", "6161", true},                  //
		{"ft/Any@1", "7801", false},                 // truncated text
		{"ft/Any@1", "7b0000000000000001", false},   // long length, truncated
		{"ft/Any@1", "7bffffffffffffffff61", false}, // length overflow
		{"ft/Var@1", "a264247461676142662476616c75654101", true},
		{"ft/Var@1", "a264247461676142662476616c7565420102", true},
		{"ft/Var@1", "a2662476616c7565420102642474616761 42", false},        // keys swapped
		{"ft/Var@1", "b8026424746167614266 2476616c7565420102", false},      // non-shortest map head
		{"ft/Var@1", "a2642474616778014266 2476616c7565420102", false},      // non-shortest tag text
		{"ft/Var@1", "a264247461676142662476616c7565420102 00", false},      // trailing byte
		{"ft/Var@1", "a264247461676142662476616c756542010200", false},       // trailing byte
		{"ft/Var@1", "a264247461676142662476616c75655f420102ff", false},     // indefinite byte string
		{"ft/Var@1", "a36424746167614266 2476616c756542010261 7800", false}, // extra key
	}
	for _, c := range cases {
		data, err := hex.DecodeString(strings.ReplaceAll(c.hex, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		if fast, _ := checkFast(t, r, c.schema, data); fast != c.fast {
			t.Errorf("%s %s: fast path says %v, want %v", c.schema, c.hex, fast, c.fast)
		}
	}
}

// TestFastPathMutations derives from every case non-canonical encodings of
// the same value (which the general path refuses and the fast path must
// not accept) and arbitrary byte edits (where only the implication holds).
func TestFastPathMutations(t *testing.T) {
	r := fastRegistry(t)
	type input struct {
		schema string
		data   []byte
	}
	var inputs []input
	for _, c := range fastCases {
		data, err := schemas.Marshal(c.v)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{c.schema, data})
	}
	for _, c := range validJSON {
		data, err := r.FromJSON(c.schema, []byte(c.js))
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, input{c.schema, data})
	}
	structural, edits := 0, 0
	for _, in := range inputs {
		it, rest, ok := parseItem(in.data)
		if !ok || len(rest) != 0 {
			t.Fatalf("parse %x", in.data)
		}
		origValid := schemas.ValidateSlow(r, in.schema, in.data) == nil
		n := it.count()
		for k := 0; k < n; k++ {
			for m := mutation(0); m < numMutations; m++ {
				mut, changed := it.emit(k, m)
				if !changed {
					continue
				}
				structural++
				fast, slow := checkFast(t, r, in.schema, mut)
				if (m.refused() || (m == mutSwapString && origValid)) && (fast || slow == nil) {
					t.Fatalf("%s: %v of item %d of %x gives %x: fast=%v, general path %v; want both to refuse", in.schema, m, k, in.data, mut, fast, slow)
				}
			}
		}
		for i := 0; i <= len(in.data); i++ {
			edits++
			checkFast(t, r, in.schema, in.data[:i])
			checkFast(t, r, in.schema, append(append(append([]byte(nil), in.data[:i]...), 0x00), in.data[i:]...))
			if i == len(in.data) {
				break
			}
			for _, b := range []byte{0x00, 0x01, 0x17, 0x18, 0x1f, 0x20, 0x3b, 0x40, 0x5f, 0x60, 0x61, 0x7f, 0x80, 0x9f, 0xa0, 0xa1, 0xbf, 0xc0,
				0xf4, 0xf5, 0xf6, 0xf7, 0xf9, 0xfb, 0xff, in.data[i] ^ 1, in.data[i] + 1, in.data[i] - 1, in.data[i] ^ 0x20, in.data[i] ^ 0x80} {
				mut := bytes.Clone(in.data)
				mut[i] = b
				edits++
				checkFast(t, r, in.schema, mut)
			}
		}
	}
	t.Logf("%d inputs, %d structural mutants, %d byte edits", len(inputs), structural, edits)
}

// item is a parsed CBOR data item, kept close to its encoding so that it
// can be written back with one deliberate deviation.
type item struct {
	major   byte
	arg     uint64
	raw     []byte // the whole encoding for major 7 items
	payload []byte // strings
	kids    []item // array elements; map keys and values alternating
}

func parseItem(b []byte) (item, []byte, bool) {
	if len(b) == 0 {
		return item{}, nil, false
	}
	major, ai := b[0]>>5, b[0]&0x1f
	if major == 7 {
		size := map[byte]int{20: 1, 21: 1, 22: 1, 25: 3, 26: 5, 27: 9}[ai]
		if size == 0 || len(b) < size {
			return item{}, nil, false
		}
		return item{major: 7, raw: b[:size]}, b[size:], true
	}
	var arg uint64
	switch {
	case ai < 24:
		arg, b = uint64(ai), b[1:]
	case ai <= 27:
		w := 1 << (ai - 24)
		if len(b) < 1+w {
			return item{}, nil, false
		}
		for _, x := range b[1 : 1+w] {
			arg = arg<<8 | uint64(x)
		}
		b = b[1+w:]
	default:
		return item{}, nil, false
	}
	it := item{major: major, arg: arg}
	switch major {
	case 2, 3:
		if uint64(len(b)) < arg {
			return item{}, nil, false
		}
		it.payload, b = b[:arg], b[arg:]
	case 4, 5:
		if arg > uint64(len(b)) { // every element takes a byte; also keeps n*2 from overflowing
			return item{}, nil, false
		}
		n := arg
		if major == 5 {
			n *= 2
		}
		for range n {
			var k item
			var ok bool
			if k, b, ok = parseItem(b); !ok {
				return item{}, nil, false
			}
			it.kids = append(it.kids, k)
		}
	case 6:
		return item{}, nil, false
	}
	return it, b, true
}

func (it item) count() int {
	n := 1
	for _, k := range it.kids {
		n += k.count()
	}
	return n
}

type mutation int

const (
	mutWiden      mutation = iota // head one size longer than needed
	mutIndefinite                 // indefinite length
	mutReverse                    // map pairs in reverse order
	mutDuplicate                  // first map pair twice
	mutTag                        // wrapped in a tag
	mutSwapString                 // text <-> bytes
	mutFloat                      // integer written as a float64
	mutBadUTF8                    // text with an invalid byte appended
	mutDropLast                   // last element or pair removed (canonical)
	mutExtraKey                   // a long key appended to a map (canonical)
	numMutations
)

// refused reports whether the general path refuses every such mutant
// (swapping a string's kind makes a valid value invalid, not always the
// other way round).
func (m mutation) refused() bool { return m != mutDropLast && m != mutExtraKey && m != mutSwapString }

func (m mutation) String() string {
	return [...]string{"widen", "indefinite", "reverse", "duplicate", "tag", "swap string", "float", "bad UTF-8", "drop last", "extra key"}[m]
}

// appendHead writes a head in shortest form, or one size longer when widen.
func appendHead(out []byte, major byte, arg uint64, widen bool) []byte {
	size := 8
	switch {
	case arg < 24:
		size = 0
	case arg < 1<<8:
		size = 1
	case arg < 1<<16:
		size = 2
	case arg < 1<<32:
		size = 4
	}
	if widen {
		size = map[int]int{0: 1, 1: 2, 2: 4, 4: 8, 8: 8}[size]
	}
	mb := major << 5
	switch size {
	case 0:
		return append(out, mb|byte(arg))
	case 1:
		return append(out, mb|24, byte(arg))
	case 2:
		return binary.BigEndian.AppendUint16(append(out, mb|25), uint16(arg))
	case 4:
		return binary.BigEndian.AppendUint32(append(out, mb|26), uint32(arg))
	}
	return binary.BigEndian.AppendUint64(append(out, mb|27), arg)
}

// emit writes it back, applying m to the k-th item in pre-order; changed
// reports whether m applied there.
func (it item) emit(k int, m mutation) ([]byte, bool) {
	idx := 0
	var changed bool
	var w func(out []byte, it item) []byte
	w = func(out []byte, it item) []byte {
		here := idx == k
		idx++
		if it.major == 7 {
			return append(out, it.raw...)
		}
		if here && m == mutTag {
			changed = true
			out = append(out, 0xc6)
			here = false
		}
		major, arg, payload, kids := it.major, it.arg, it.payload, it.kids
		headDone := false
		if here {
			switch {
			case m == mutWiden && arg < 1<<32:
				changed = true
				out = appendHead(out, major, arg, true)
				headDone = true
			case m == mutIndefinite && major >= 2 && major <= 5:
				changed = true
				out = append(out, major<<5|31)
				if major <= 3 {
					out = appendHead(out, major, arg, false)
					out = append(append(out, payload...), 0xff)
					return out
				}
				for _, kid := range kids {
					out = w(out, kid)
				}
				return append(out, 0xff)
			case m == mutReverse && major == 5 && arg >= 2:
				changed = true
				rev := make([]item, 0, len(kids))
				for i := len(kids) - 2; i >= 0; i -= 2 {
					rev = append(rev, kids[i], kids[i+1])
				}
				kids = rev
			case m == mutDuplicate && major == 5 && arg >= 1:
				changed = true
				kids = append([]item{kids[0], kids[1]}, kids...)
				arg++
			case m == mutSwapString && (major == 2 || major == 3):
				changed = true
				major ^= 1
			case m == mutFloat && major <= 1:
				changed = true
				f := float64(arg)
				if major == 1 {
					f = -1 - f
				}
				return binary.BigEndian.AppendUint64(append(out, 0xfb), math.Float64bits(f))
			case m == mutBadUTF8 && major == 3:
				changed = true
				payload = append(bytes.Clone(payload), 0xff)
				arg++
			case m == mutDropLast && (major == 4 || major == 5) && arg >= 1:
				changed = true
				arg--
				if major == 5 {
					kids = kids[:len(kids)-2]
				} else {
					kids = kids[:len(kids)-1]
				}
			case m == mutExtraKey && major == 5:
				changed = true
				arg++
				kids = append(append([]item(nil), kids...), item{major: 3, arg: 30, payload: bytes.Repeat([]byte("~"), 30)}, item{major: 0})
			}
		}
		if !headDone {
			out = appendHead(out, major, arg, false)
		}
		out = append(out, payload...)
		for _, kid := range kids {
			out = w(out, kid) // indices after k may shift; only k matters
		}
		return out
	}
	out := w(nil, it)
	return out, changed
}

// TestFromJSONFastPathUsed: values of schemas without byte strings are
// converted by FromJSON's fast path; schemas with byte strings below them
// never take it; either way the bytes are the general path's.
func TestFromJSONFastPathUsed(t *testing.T) {
	r := fastRegistry(t)
	for _, c := range validJSON {
		slow, err := schemas.FromJSONSlow(r, c.schema, []byte(c.js))
		if err != nil {
			t.Fatalf("%s: %v", c.schema, err)
		}
		fast, err := r.FromJSON(c.schema, []byte(c.js))
		if err != nil || !bytes.Equal(fast, slow) {
			t.Fatalf("%s: fast %x (%v), general %x", c.schema, fast, err, slow)
		}
	}
	for _, c := range []struct{ schema, js string }{
		{"ft/Tree@1", `{"v":1,"kids":[{"v":2},{"v":-3,"kids":[]}]}`},
		{"ft/Int@1", `9`},
		{"ft/Closed@1", `{"a":[1,{"x":null}],"c":"z"}`},
	} {
		if !schemas.FastFromJSON(r, c.schema, []byte(c.js)) {
			t.Fatalf("%s %s: a schema without byte strings did not take the fast path", c.schema, c.js)
		}
		slow, err := schemas.FromJSONSlow(r, c.schema, []byte(c.js))
		fast, ferr := r.FromJSON(c.schema, []byte(c.js))
		if err != nil || ferr != nil || !bytes.Equal(fast, slow) {
			t.Fatalf("%s: fast %x (%v), general %x (%v)", c.schema, fast, ferr, slow, err)
		}
	}
	if schemas.FastFromJSON(r, "ft/Arr@1", []byte(`["AAAA"]`)) {
		t.Fatal("a schema with byte strings took the fast path")
	}
	// Numbers not written as integers take the general path: converted to
	// float64 first, "1.0000000000000001" would pass as the integer 1,
	// which JSON Schema does not consider it.
	for _, js := range []string{`9.0`, `1e1`, `1.0000000000000001`} {
		if schemas.FastFromJSON(r, "ft/Int@1", []byte(js)) {
			t.Fatalf("%s took the fast path", js)
		}
		fast, ferr := r.FromJSON("ft/Int@1", []byte(js))
		slow, serr := schemas.FromJSONSlow(r, "ft/Int@1", []byte(js))
		if fmt.Sprint(ferr) != fmt.Sprint(serr) || !bytes.Equal(fast, slow) {
			t.Fatalf("%s: FromJSON (%x, %v), general path (%x, %v)", js, fast, ferr, slow, serr)
		}
	}
}

// TestValidateCachesGeneralPathSuccesses: a value only the general path can
// judge is remembered once accepted; refusals are never remembered (their
// message is recomputed each time); values the fast path accepts need no
// cache and take none.
func TestValidateCachesGeneralPathSuccesses(t *testing.T) {
	r := schemas.NewRegistry()
	if err := r.Define([]schemas.SchemaDef{
		{Name: "c/Even@1", Schema: []byte(`{"type":"integer","multipleOf":2}`)}, // multipleOf: no fast plan
		{Name: "c/Int@1", Schema: []byte(`{"type":"integer"}`)},
	}); err != nil {
		t.Fatal(err)
	}
	if schemas.HasFastPlan(r, "c/Even@1") || !schemas.HasFastPlan(r, "c/Int@1") {
		t.Fatal("test schemas no longer split between the two paths")
	}
	even, odd := schemas.MustMarshal(4), schemas.MustMarshal(3)
	if schemas.ValidCached(r, "c/Even@1", even) {
		t.Fatal("cached before first use")
	}
	for i := 0; i < 2; i++ {
		if err := r.Validate("c/Even@1", even); err != nil {
			t.Fatal(err)
		}
		if !schemas.ValidCached(r, "c/Even@1", even) {
			t.Fatal("accepted value not remembered")
		}
	}
	e1, e2 := r.Validate("c/Even@1", odd), r.Validate("c/Even@1", odd)
	if e1 == nil || e2 == nil || e1.Error() != e2.Error() || schemas.ValidCached(r, "c/Even@1", odd) {
		t.Fatalf("refusal: %v / %v, cached %v", e1, e2, schemas.ValidCached(r, "c/Even@1", odd))
	}
	if err := r.Validate("c/Int@1", odd); err != nil || schemas.ValidCached(r, "c/Int@1", odd) {
		t.Fatalf("fast-path value: %v, cached %v", err, schemas.ValidCached(r, "c/Int@1", odd))
	}
}
