//go:build wasip1

package sdk

import "unsafe"

// exported is the module this wasm build serves. A wasm instance is one
// module, so this is the one piece of package state.
var exported guest

// Export makes m the module this wasm build exports, with the guest side of
// docs/wasm-abi.md (aos_abi_v1, aos_alloc, aos_step) dispatching on m's
// entrypoint names. Call it once, from the main package's init: a reactor
// module's main never runs.
func Export(m *Module) {
	if exported.mod != nil {
		panic("sdk: Export called twice (modules " + exported.mod.name + " and " + m.name + ")")
	}
	exported.mod = m
}

//go:wasmexport aos_abi_v1
func aosABIv1() {}

//go:wasmexport aos_alloc
func aosAlloc(size int32) unsafe.Pointer {
	b := exported.alloc(size)
	if b == nil {
		return nil
	}
	return unsafe.Pointer(unsafe.SliceData(b))
}

//go:wasmexport aos_step
func aosStep(entryPtr unsafe.Pointer, entryLen int32, inPtr unsafe.Pointer, inLen int32) int64 {
	var entry, in []byte
	if entryLen > 0 {
		entry = unsafe.Slice((*byte)(entryPtr), entryLen)
	}
	if inLen > 0 {
		in = unsafe.Slice((*byte)(inPtr), inLen)
	}
	res := exported.step(entry, in)
	return int64(uintptr(unsafe.Pointer(unsafe.SliceData(res))))<<32 | int64(len(res))
}
