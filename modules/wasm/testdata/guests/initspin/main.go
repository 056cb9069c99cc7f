//go:build wasip1

// Command initspin implements the module ABI, but its package init never
// ends: only a deadline stops _initialize.
package main

func main() {}

var spins uint64

func init() {
	for {
		spins++
	}
}

//go:wasmexport aos_abi_v1
func aosABIv1() {}

//go:wasmexport aos_alloc
func aosAlloc(size int32) int32 { return 0 }

//go:wasmexport aos_step
func aosStep(entryPtr, entryLen, inPtr, inLen int32) int64 { return 0 }
