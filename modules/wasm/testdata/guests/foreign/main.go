//go:build wasip1

// Command foreign implements the module ABI but imports a function from a
// module other than wasi_snapshot_preview1, which the host must refuse.
package main

func main() {}

//go:wasmimport env foo
func foo() int32

//go:wasmexport aos_abi_v1
func aosABIv1() {}

//go:wasmexport aos_alloc
func aosAlloc(size int32) int32 { return 0 }

//go:wasmexport aos_step
func aosStep(entryPtr, entryLen, inPtr, inLen int32) int64 { return int64(foo()) }
