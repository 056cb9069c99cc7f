//go:build wasip1

package main

var n int = "not an int" // the compile error build's tests expect to see

func main() {}
