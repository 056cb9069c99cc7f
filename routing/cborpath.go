package routing

import (
	"errors"
	"fmt"
	"strings"

	"github.com/aos-kernel/aos/internal/canon"
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
	major, arg, next, ok := canon.Head(data, i)
	if !ok {
		return 0, 0, 0, errMalformed
	}
	return major, arg, next, nil
}

// skip returns the offset just after the item starting at data[i:]. The
// input is canonical (Route's precondition), so text is not checked again.
func skip(data []byte, i int) (int, error) {
	next, p := canon.Skip(data, i, false)
	if p != canon.OK {
		return 0, errMalformed
	}
	return next, nil
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
		if major != canon.MajorMap {
			return nil, fmt.Errorf("/%s is not an object", strings.Join(path[:i], "/"))
		}
		found := -1
		for k := uint64(0); k < n; k++ {
			km, kl, kstart, err := head(data, next)
			if err != nil {
				return nil, err
			}
			if km != canon.MajorText || kl > uint64(len(data)-kstart) {
				return nil, errMalformed
			}
			kend := kstart + int(kl)
			if string(data[kstart:kend]) == p {
				found = kend
				break
			}
			if next, err = skip(data, kend); err != nil {
				return nil, err
			}
		}
		if found < 0 {
			return nil, fmt.Errorf("no field /%s", strings.Join(path[:i+1], "/"))
		}
		start = found
	}
	end, err := skip(data, start)
	if err != nil {
		return nil, err
	}
	if end-start == 1 && data[start] == canon.Null {
		return nil, fmt.Errorf("/%s is null", strings.Join(path, "/"))
	}
	// A copy: the key outlives the event (cells keep it), and a sub-slice
	// would keep the whole event's buffer alive with it.
	return append([]byte(nil), data[start:end]...), nil
}
