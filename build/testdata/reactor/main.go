//go:build wasip1

// Package main is the smallest WASI reactor: enough for build's tests, which
// check what Build does with an artifact, not what the module computes.
package main

//go:wasmexport aos_abi_v1
func abi() {}

func main() {}
