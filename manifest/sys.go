package manifest

import (
	"github.com/aos-kernel/aos/modules/sys"
	"github.com/aos-kernel/aos/schemas"
)

// Names of the built-in sys/ defs the loader itself refers to (those whose
// shapes a step meets are package sys's).
const (
	SysWorkflowContext       = sys.SchemaContext
	SysEffectReceiptEnvelope = sys.SchemaReceiptEnvelope
	SysEffectReceiptRejected = sys.SchemaReceiptRejected
	SysEffectCancelled       = sys.SchemaEffectCancelled

	SysTimerSet    = sys.EffectTimerSet
	SysHTTPRequest = "sys/http.request@1"
	// SysHTTPRequest2 is sys/http.request@1 with a per-call retry policy
	// and an attempt count in its receipt.
	SysHTTPRequest2 = "sys/http.request@2"
	SysBlobPut      = sys.EffectBlobPut
	SysBlobGet      = "sys/blob.get@1"
)

// sysEffectDecls are the built-in effects, as a manifest would declare them,
// sorted by name.
var sysEffectDecls = [...]struct{ name, params, receipt string }{
	{SysBlobGet, "sys/BlobGetParams@1", "sys/BlobGetReceipt@1"},
	{SysBlobPut, "sys/BlobPutParams@1", sys.SchemaBlobPutReceipt},
	{SysHTTPRequest, "sys/HttpRequestParams@1", "sys/HttpRequestReceipt@1"},
	{SysHTTPRequest2, "sys/HttpRequestParams@2", "sys/HttpRequestReceipt@2"},
	{SysTimerSet, sys.SchemaTimerSetParams, sys.SchemaTimerSetReceipt},
}

// SysEffects returns fresh copies of the built-in effect defs, sorted by name.
// They are present in every manifest: workflows may list them in
// effects_emitted without declaring them, and Manifest.Effects holds them.
// Their Hash is the hash of the def written as a user would declare it.
func SysEffects() []*EffectDef {
	out := make([]*EffectDef, 0, len(sysEffectDecls))
	for _, e := range sysEffectDecls {
		d := &EffectDef{Name: e.name, Params: e.params, Receipt: e.receipt}
		d.Hash, _ = defHash(sysEffectValue(d))
		out = append(out, d)
	}
	return out
}

// IsSysEffect reports whether name is a built-in effect.
func IsSysEffect(name string) bool {
	for _, e := range sysEffectDecls {
		if e.name == name {
			return true
		}
	}
	return false
}

func sysEffectValue(d *EffectDef) map[string]any {
	return map[string]any{"$kind": KindEffect, "name": d.Name, "params": d.Params, "receipt": d.Receipt}
}

// defHash is the SHA-256 of the canonical CBOR of a def's declared value.
func defHash(v map[string]any) (schemas.Hash, error) {
	h, _, err := schemas.HashValue(toCBORValue(v))
	return h, err
}
