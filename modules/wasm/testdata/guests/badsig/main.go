//go:build wasip1

// Command badsig exports aos_step with the wrong result type.
package main

func main() {}

//go:wasmexport aos_abi_v1
func aosABIv1() {}

//go:wasmexport aos_alloc
func aosAlloc(size int32) int32 { return 0 }

//go:wasmexport aos_step
func aosStep(entryPtr, entryLen, inPtr, inLen int32) int32 { return 0 }
