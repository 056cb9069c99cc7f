package routing

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
)

// Key extraction reads the key field straight out of the event's canonical
// CBOR: it walks map heads, compares text keys and skips the values it does
// not need, and returns the key's bytes as they are. For canonical input
// (Route's precondition) those bytes are exactly what decoding the event and
// re-encoding the field would give, without building the decoded event —
// which was most of Route's cost.

var errMalformed = errors.New("malformed CBOR")

// head reads one CBOR item head at data[i:]: major type, argument, and the
// offset after the head. Indefinite lengths and reserved additional
// information are malformed here (canonical input never has them).
func head(data []byte, i int) (major byte, arg uint64, next int, err error) {
	if i >= len(data) {
		return 0, 0, 0, errMalformed
	}
	b := data[i]
	major, ai := b>>5, b&0x1f
	i++
	switch {
	case ai < 24:
		return major, uint64(ai), i, nil
	case ai == 24:
		if i+1 > len(data) {
			return 0, 0, 0, errMalformed
		}
		return major, uint64(data[i]), i + 1, nil
	case ai == 25:
		if i+2 > len(data) {
			return 0, 0, 0, errMalformed
		}
		return major, uint64(binary.BigEndian.Uint16(data[i:])), i + 2, nil
	case ai == 26:
		if i+4 > len(data) {
			return 0, 0, 0, errMalformed
		}
		return major, uint64(binary.BigEndian.Uint32(data[i:])), i + 4, nil
	case ai == 27:
		if i+8 > len(data) {
			return 0, 0, 0, errMalformed
		}
		return major, binary.BigEndian.Uint64(data[i:]), i + 8, nil
	}
	return 0, 0, 0, errMalformed
}

// skip returns the offset just after the item starting at data[i:].
func skip(data []byte, i int, depth int) (int, error) {
	if depth > 64 {
		return 0, errMalformed
	}
	major, arg, next, err := head(data, i)
	if err != nil {
		return 0, err
	}
	switch major {
	case 0, 1, 7: // integers, simple values and floats: the head is the item
		return next, nil
	case 2, 3:
		if arg > uint64(len(data)-next) {
			return 0, errMalformed
		}
		return next + int(arg), nil
	case 4, 5:
		n := arg
		if major == 5 {
			if n > uint64(len(data)) {
				return 0, errMalformed
			}
			n *= 2
		}
		if n > uint64(len(data)-next) { // every item takes at least one byte
			return 0, errMalformed
		}
		for k := uint64(0); k < n; k++ {
			if next, err = skip(data, next, depth+1); err != nil {
				return 0, err
			}
		}
		return next, nil
	}
	return 0, errMalformed // tags (6) never occur in canonical values here
}

// lookupCBOR returns the encoded item at path inside the canonical CBOR
// data. Errors name the path the way a reader of the event would.
func lookupCBOR(data []byte, path []string) ([]byte, error) {
	start := 0
	for i, p := range path {
		major, n, next, err := head(data, start)
		if err != nil {
			return nil, err
		}
		if major != 5 {
			return nil, fmt.Errorf("/%s is not an object", strings.Join(path[:i], "/"))
		}
		found := -1
		for k := uint64(0); k < n; k++ {
			km, kl, kstart, err := head(data, next)
			if err != nil {
				return nil, err
			}
			if km != 3 || kl > uint64(len(data)-kstart) {
				return nil, errMalformed
			}
			kend := kstart + int(kl)
			if string(data[kstart:kend]) == p {
				found = kend
				break
			}
			if next, err = skip(data, kend, 0); err != nil {
				return nil, err
			}
		}
		if found < 0 {
			return nil, fmt.Errorf("no field /%s", strings.Join(path[:i+1], "/"))
		}
		start = found
	}
	end, err := skip(data, start, 0)
	if err != nil {
		return nil, err
	}
	if end-start == 1 && data[start] == 0xf6 {
		return nil, fmt.Errorf("/%s is null", strings.Join(path, "/"))
	}
	// A copy: the key outlives the event (cells keep it), and a sub-slice
	// would keep the whole event's buffer alive with it.
	return append([]byte(nil), data[start:end]...), nil
}
