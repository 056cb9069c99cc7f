//go:build wasip1

// Command nostep implements the module ABI but for aos_step.
package main

func main() {}

//go:wasmexport aos_abi_v1
func aosABIv1() {}

//go:wasmexport aos_alloc
func aosAlloc(size int32) int32 { return 0 }
