//go:build wasip1

// Command initpanic implements the module ABI, but its package init
// panics: _initialize fails with the Go runtime's exit code 2 and the
// panic on stderr.
package main

func main() {}

func init() { panic("initpanic: refusing to start") }

//go:wasmexport aos_abi_v1
func aosABIv1() {}

//go:wasmexport aos_alloc
func aosAlloc(size int32) int32 { return 0 }

//go:wasmexport aos_step
func aosStep(entryPtr, entryLen, inPtr, inLen int32) int64 { return 0 }
