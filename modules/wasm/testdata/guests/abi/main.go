//go:build wasip1

// Command abi is the test guest of modules/wasm: it implements the module
// ABI (docs/wasm-abi.md) by hand, with one entrypoint per behaviour the host
// must handle, so that one build serves every test.
package main

import (
	crand "crypto/rand"
	"os"
	"runtime"
	"strconv"
	"time"
	"unsafe"
)

func main() {}

var (
	inBuf  []byte // the buffer aos_alloc hands out
	result []byte // the last result buffer; kept alive until the next call
	global uint64 // counter-global's count, kept across steps of one instance
	sink   [][]byte
	spin   uint64

	// Package init runs inside _initialize, where the host answers the
	// wall clock and randomness with deterministic stand-ins.
	initWall = time.Now().UnixNano()
	initRand = func() uint64 {
		var b [8]byte
		if _, err := crand.Read(b[:]); err != nil {
			panic(err)
		}
		return le64(b[:])
	}()
)

//go:wasmexport aos_abi_v1
func aosABIv1() {}

//go:wasmexport aos_alloc
func aosAlloc(size int32) int32 {
	if cap(inBuf) < int(size) {
		inBuf = make([]byte, size)
	}
	inBuf = inBuf[:size]
	return ptrOf(inBuf)
}

//go:wasmexport aos_step
func aosStep(entryPtr, entryLen, inPtr, inLen int32) int64 {
	entry := string(view(entryPtr, entryLen))
	in := view(inPtr, inLen)
	result = step(entry, in)
	return int64(ptrOf(result))<<32 | int64(len(result))
}

func step(entry string, in []byte) []byte {
	state, _ := mapGet(in, "state")
	ev, _ := mapGet(in, "event")
	value, _ := mapGet(ev, "value")
	stateBytes, _ := bytesOf(state)
	valueBytes, _ := bytesOf(value)

	switch entry {
	case "ok":
		// Every output field, so the host's decoder sees them all.
		out := []byte{0xa4}
		out = appendText(out, "ann")
		out = appendBytes(out, []byte{0x01})
		out = appendText(out, "state")
		out = appendBytes(out, stateBytes)
		out = appendText(out, "effects")
		out = append(out, 0x81, 0xa4)
		out = appendText(out, "effect")
		out = appendText(out, "timer.set")
		out = appendText(out, "params")
		out = appendBytes(out, []byte{0xa0})
		out = appendText(out, "issuer_ref")
		out = appendText(out, "r1")
		out = appendText(out, "idempotency_key")
		out = appendBytes(out, []byte{0x01, 0x02})
		out = appendText(out, "domain_events")
		out = append(out, 0x81, 0xa2)
		out = appendText(out, "value")
		out = appendBytes(out, valueBytes)
		out = appendText(out, "schema")
		out = appendText(out, "test/Echoed@1")
		return output(out)
	case "input":
		// The input envelope exactly as the host wrote it.
		return stateOut(in)
	case "delete":
		return output(append(appendText([]byte{0xa1}, "state"), 0xf6))
	case "counter":
		var n uint64
		if stateBytes != nil {
			c, _ := mapGet(stateBytes, "count")
			n, _ = uintOf(c)
		}
		by, _ := mapGet(valueBytes, "by")
		k, _ := uintOf(by)
		return stateOut(countState(n + k))
	case "spin":
		// A loop-heavy step: by thousand iterations of arithmetic.
		by, _ := mapGet(valueBytes, "by")
		k, _ := uintOf(by)
		x := uint64(1)
		for i := uint64(0); i < k*1000; i++ {
			x = x*6364136223846793005 + i
		}
		return stateOut(countState(x))
	case "counter-global":
		global++
		return stateOut(countState(global))
	case "initvals":
		// What package init saw: the stand-ins of a fresh instance.
		s := appendText([]byte{0xa2}, "rand")
		s = appendUint(s, initRand)
		s = appendText(s, "wall")
		s = appendUint(s, uint64(initWall))
		return stateOut(s)
	case "gc":
		return stateOut(churn(stateBytes))
	case "print":
		os.Stdout.WriteString("to stdout\n")
		os.Stderr.WriteString("to stderr\n")
		return stateOut(nil)
	case "fault":
		return append([]byte{1}, "business says no"...)
	case "clock":
		// Allowed, and frozen: the Go runtime reads it at every GC.
		return stateOut(countState(uint64(time.Now().UnixNano())))
	case "random":
		var b [4]byte
		_, _ = crand.Read(b[:])
		return stateOut(nil)
	case "file":
		_, err := os.ReadFile("/etc/hostname")
		os.Stderr.WriteString("file: " + errText(err) + "\n")
		return stateOut(nil)
	case "sleep":
		time.Sleep(time.Millisecond)
		return stateOut(nil)
	case "loop":
		for {
			spin++
		}
	case "alloc":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "trap":
		// Past the end of linear memory: a wasm trap, not a Go panic.
		p := (*uint64)(unsafe.Pointer(uintptr(0xfffffff0)))
		spin = *p
		return stateOut(nil)
	case "panic":
		panic("boom")
	case "randompanic":
		// The forbidden call is the reason, whatever the guest does next.
		var b [4]byte
		_, _ = crand.Read(b[:])
		panic("after random")
	case "printexit":
		os.Stdout.WriteString("to stdout\n")
		os.Stderr.WriteString("to stderr\n")
		os.Exit(4)
	case "exit":
		os.Exit(3)
	case "badtag":
		return []byte{7, 0xa0}
	case "empty":
		return nil
	case "noncanonical":
		// state's one-byte string with a two-byte head.
		return output(append(appendText([]byte{0xa1}, "state"), 0x58, 0x01, 0x00))
	case "unknownkey":
		out := appendText([]byte{0xa2}, "x")
		out = append(out, 0x01)
		out = appendText(out, "state")
		return output(append(out, 0xf6))
	case "bigoutput":
		return stateOut(make([]byte, 8192))
	case "badptr":
		result = nil
		return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(0xffffff00))), 16)
	}
	return append([]byte{1}, "unknown entrypoint "+strconv.Quote(entry)...)
}

// churn does map, slice and string work and allocates enough to collect,
// as a normal step does, and returns a digest that depends on all of it.
func churn(seed []byte) []byte {
	m := map[string][]int{}
	for i := 0; i < 500; i++ {
		k := "k" + strconv.Itoa(i%97) + string(seed)
		m[k] = append(m[k], i)
		sink = append(sink, make([]byte, 4096))
		if len(sink) > 256 {
			sink = sink[:0]
		}
	}
	if len(seed) > 0 && seed[0] == 'G' {
		runtime.GC()
	}
	var sum uint64
	for k, v := range m {
		sum += uint64(len(k) * len(v))
	}
	return countState(sum)
}

func errText(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}

func countState(n uint64) []byte {
	return appendUint(appendText([]byte{0xa1}, "count"), n)
}

func stateOut(state []byte) []byte {
	out := appendText([]byte{0xa1}, "state")
	return output(appendBytes(out, state))
}

func output(envelope []byte) []byte { return append([]byte{0}, envelope...) }

func view(ptr, n int32) []byte {
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(uintptr(ptr))), n)
}

func ptrOf(b []byte) int32 {
	if len(b) == 0 {
		return 0
	}
	return int32(uintptr(unsafe.Pointer(unsafe.SliceData(b))))
}

func le64(b []byte) uint64 {
	var v uint64
	for i := 7; i >= 0; i-- {
		v = v<<8 | uint64(b[i])
	}
	return v
}

// A minimal CBOR reader and writer: enough for the envelopes.

func head(b []byte) (major byte, arg uint64, n int) {
	if len(b) == 0 {
		return 0, 0, -1
	}
	major, ai := b[0]>>5, b[0]&31
	switch {
	case ai < 24:
		return major, uint64(ai), 1
	case ai == 24 && len(b) >= 2:
		return major, uint64(b[1]), 2
	case ai == 25 && len(b) >= 3:
		return major, uint64(b[1])<<8 | uint64(b[2]), 3
	case ai == 26 && len(b) >= 5:
		return major, uint64(b[1])<<24 | uint64(b[2])<<16 | uint64(b[3])<<8 | uint64(b[4]), 5
	case ai == 27 && len(b) >= 9:
		var v uint64
		for _, c := range b[1:9] {
			v = v<<8 | uint64(c)
		}
		return major, v, 9
	}
	return 0, 0, -1
}

// itemLen is the encoded length of the item at the start of b, or -1.
func itemLen(b []byte) int {
	major, arg, n := head(b)
	if n < 0 {
		return -1
	}
	switch major {
	case 2, 3:
		if uint64(len(b)-n) < arg {
			return -1
		}
		return n + int(arg)
	case 4, 5:
		items := arg
		if major == 5 {
			items *= 2
		}
		for i := uint64(0); i < items; i++ {
			l := itemLen(b[n:])
			if l < 0 {
				return -1
			}
			n += l
		}
		return n
	}
	return n
}

func mapGet(b []byte, key string) ([]byte, bool) {
	major, pairs, n := head(b)
	if n < 0 || major != 5 {
		return nil, false
	}
	b = b[n:]
	for i := uint64(0); i < pairs; i++ {
		kl := itemLen(b)
		if kl < 0 {
			return nil, false
		}
		k := b[:kl]
		b = b[kl:]
		vl := itemLen(b)
		if vl < 0 {
			return nil, false
		}
		if km, kn, hn := head(k); km == 3 && string(k[hn:hn+int(kn)]) == key {
			return b[:vl], true
		}
		b = b[vl:]
	}
	return nil, false
}

func bytesOf(item []byte) ([]byte, bool) {
	if len(item) == 1 && item[0] == 0xf6 {
		return nil, true
	}
	major, arg, n := head(item)
	if n < 0 || major != 2 {
		return nil, false
	}
	return item[n : n+int(arg)], true
}

func uintOf(item []byte) (uint64, bool) {
	major, arg, n := head(item)
	return arg, n > 0 && major == 0
}

func appendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return append(b, m|25, byte(n>>8), byte(n))
	case n <= 0xffffffff:
		return append(b, m|26, byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
	}
	return append(b, m|27, byte(n>>56), byte(n>>48), byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n))
}

func appendUint(b []byte, n uint64) []byte { return appendHead(b, 0, n) }

func appendText(b []byte, s string) []byte { return append(appendHead(b, 3, uint64(len(s))), s...) }

func appendBytes(b, v []byte) []byte {
	if v == nil {
		return append(b, 0xf6)
	}
	return append(appendHead(b, 2, uint64(len(v))), v...)
}
