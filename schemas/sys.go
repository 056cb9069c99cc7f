package schemas

import (
	"bytes"
	"encoding/json"
	"sort"
	"strings"
)

// SysPrefix starts every built-in name. Manifests cannot define names under it.
const SysPrefix = "sys/"

// IsSysName reports whether name is in the built-in sys/ namespace.
func IsSysName(name string) bool { return strings.HasPrefix(name, SysPrefix) }

// Building blocks of the sys/ schemas. Byte fields are base64 strings on the
// JSON side and CBOR byte strings inside; hashes are "sha256:<64 lowercase hex>".
const (
	jsHash    = `{"type":"string","pattern":"^sha256:[0-9a-f]{64}$"}`
	jsBytes   = `{"type":"string","contentEncoding":"base64"}`
	jsUint    = `{"type":"integer","minimum":0}`
	jsString  = `{"type":"string"}`
	jsNonEmpt = `{"type":"string","minLength":1}`
	jsBool    = `{"type":"boolean"}`
	jsHeaders = `{"type":"object","additionalProperties":{"type":"string"}}`
	// The per-call retry policy of sys/http.request@2 (bounds: docs/sdk.md).
	jsHTTPRetry = `{"type":"object","additionalProperties":false,"properties":{` +
		`"max_attempts":{"type":"integer","minimum":1,"maximum":20},` +
		`"initial_backoff_ms":{"type":"integer","minimum":0,"maximum":600000},` +
		`"max_backoff_ms":{"type":"integer","minimum":0,"maximum":600000},` +
		`"multiplier":{"type":"integer","minimum":1,"maximum":10},` +
		`"retry_statuses":{"type":"array","maxItems":64,"items":{"type":"integer","minimum":100,"maximum":599}},` +
		`"no_status_retry":{"type":"boolean"}}}`
	// At least 32 bytes: 10 full base64 quads (30 bytes) then either "xxx="
	// (2 more bytes) or one or more full quads and an optional partial one.
	jsEntropy = `{"type":"string","contentEncoding":"base64",` +
		`"pattern":"^(?:[A-Za-z0-9+/]{4}){10}(?:[A-Za-z0-9+/]{3}=|(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?)$"}`
)

// sysObject writes a closed object schema: every property listed, the ones
// not in optional required, nothing else allowed.
func sysObject(props [][2]string, optional ...string) string {
	var b strings.Builder
	b.WriteString(`{"type":"object","additionalProperties":false,"properties":{`)
	var req []string
	for i, p := range props {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"` + p[0] + `":` + p[1])
		opt := false
		for _, o := range optional {
			opt = opt || o == p[0]
		}
		if !opt {
			req = append(req, `"`+p[0]+`"`)
		}
	}
	b.WriteString(`},"required":[` + strings.Join(req, ",") + `]}`)
	return b.String()
}

// sysSources are the built-in schemas, by name. They are written here rather
// than loaded from files so a binary always carries exactly the schemas its
// kernel was built against; their bytes feed manifest hashes.
var sysSources = map[string]string{
	"sys/WorkflowContext@1": sysObject([][2]string{
		{"now_ns", jsUint}, {"logical_now_ns", jsUint}, {"entropy", jsEntropy},
		{"journal_height", jsUint}, {"event_hash", jsHash}, {"manifest_hash", jsHash},
		{"workflow", jsNonEmpt}, {"workflow_hash", jsHash}, {"key", jsBytes},
		{"cell_mode", jsBool},
	}, "key"),
	"sys/EffectReceiptEnvelope@1": sysObject([][2]string{
		{"origin_workflow", jsNonEmpt}, {"origin_workflow_hash", jsHash}, {"origin_key", jsBytes},
		{"intent_hash", jsHash}, {"effect", jsNonEmpt}, {"executor", jsNonEmpt},
		{"issuer_ref", jsString}, {"payload", jsBytes},
		{"status", `{"enum":["ok","error","timeout"]}`},
		{"emitted_at_seq", jsUint}, {"signature", jsBytes},
	}, "origin_key", "issuer_ref"),
	"sys/EffectReceiptRejected@1": sysObject([][2]string{
		{"origin_workflow", jsNonEmpt}, {"origin_key", jsBytes}, {"intent_hash", jsHash},
		{"effect", jsNonEmpt}, {"error", jsString}, {"emitted_at_seq", jsUint},
	}, "origin_key"),
	"sys/EffectCancelled@1": sysObject([][2]string{
		{"origin_workflow", jsNonEmpt}, {"origin_key", jsBytes}, {"intent_hash", jsHash},
		{"effect", jsNonEmpt}, {"issuer_ref", jsString}, {"emitted_at_seq", jsUint},
		{"cancel_seq", jsUint}, {"reason", jsString}, {"by", jsNonEmpt},
	}, "origin_key", "issuer_ref"),
	"sys/EffectStreamFrame@1": sysObject([][2]string{
		{"intent_hash", jsHash}, {"seq", jsUint}, {"executor", jsNonEmpt}, {"payload", jsBytes},
	}),
	"sys/TimerSetParams@1": sysObject([][2]string{
		{"deliver_at_ns", jsUint}, {"key", jsString},
	}, "key"),
	"sys/TimerSetReceipt@1": sysObject([][2]string{
		{"delivered_at_ns", jsUint}, {"key", jsString},
	}, "key"),
	"sys/HttpRequestParams@1": sysObject([][2]string{
		{"method", jsNonEmpt}, {"url", jsNonEmpt}, {"headers", jsHeaders}, {"body", jsBytes},
		{"timeout_ms", jsUint}, {"max_body_bytes", jsUint},
	}, "headers", "body", "timeout_ms", "max_body_bytes"),
	"sys/HttpRequestReceipt@1": sysObject([][2]string{
		{"status", jsUint}, {"headers", jsHeaders}, {"body", jsBytes}, {"truncated", jsBool},
	}, "truncated"),
	// @2 adds a per-call retry policy and counts attempts in the receipt.
	// It is a new version rather than new optional fields in @1 because a
	// sys schema's bytes feed the hash of every manifest that uses it: a
	// changed @1 would rehash existing worlds' manifests, and their
	// snapshots would no longer open (kernel.restoreManifest).
	"sys/HttpRequestParams@2": sysObject([][2]string{
		{"method", jsNonEmpt}, {"url", jsNonEmpt}, {"headers", jsHeaders}, {"body", jsBytes},
		{"timeout_ms", jsUint}, {"max_body_bytes", jsUint}, {"retry", jsHTTPRetry},
	}, "headers", "body", "timeout_ms", "max_body_bytes", "retry"),
	"sys/HttpRequestReceipt@2": sysObject([][2]string{
		{"status", jsUint}, {"headers", jsHeaders}, {"body", jsBytes}, {"truncated", jsBool},
		{"attempts", `{"type":"integer","minimum":1}`},
	}, "truncated"),
	"sys/BlobPutParams@1":  sysObject([][2]string{{"bytes", jsBytes}}),
	"sys/BlobPutReceipt@1": sysObject([][2]string{{"blob_ref", jsHash}, {"size", jsUint}}),
	"sys/BlobGetParams@1":  sysObject([][2]string{{"blob_ref", jsHash}}),
	"sys/BlobGetReceipt@1": sysObject([][2]string{{"bytes", jsBytes}, {"size", jsUint}}),
}

// sysCompact holds each sys schema as compact JSON, computed once.
var sysCompact = func() map[string][]byte {
	m := make(map[string][]byte, len(sysSources))
	for name, src := range sysSources {
		var buf bytes.Buffer
		if err := json.Compact(&buf, []byte(src)); err != nil {
			panic("schemas: bad built-in schema " + name + ": " + err.Error())
		}
		m[name] = buf.Bytes()
	}
	return m
}()

// SysSchemaJSON returns the built-in sys/ schemas as compact JSON documents, by
// name. The map and slices are fresh copies; callers may keep or hash them.
func SysSchemaJSON() map[string][]byte {
	m := make(map[string][]byte, len(sysCompact))
	for k, v := range sysCompact {
		m[k] = bytes.Clone(v)
	}
	return m
}

// SysNames lists the built-in schema names, sorted.
func SysNames() []string {
	names := make([]string, 0, len(sysCompact))
	for k := range sysCompact {
		names = append(names, k)
	}
	sort.Strings(names)
	return names
}
