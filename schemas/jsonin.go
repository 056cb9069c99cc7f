package schemas

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// Limits on JSON input. They match what the CBOR decoder accepts, so every
// value FromJSON produces can be decoded again.
const (
	maxDepth     = 64      // nested arrays and objects
	maxElems     = 1 << 20 // elements of one array, members of one object
	maxNumberLen = 400     // characters of one number literal
	maxExp10     = 308     // |x| < 10^309 (float64 range)
	minExp10     = -320    // smallest decimal exponent of a non-zero number
	// maxExpLiteral bounds the exponent as written, whatever the digits:
	// "0e10000000000000000000" is zero, but big.Rat (which the JSON Schema
	// validator parses numbers with) cannot read it and the validator
	// panics. With at most maxNumberLen digits, no value in float64 range
	// needs a written exponent beyond ±(maxExp10+maxNumberLen).
	maxExpLiteral = 1000
)

// ErrBadJSON reports JSON input that is malformed or outside what a value may hold.
var ErrBadJSON = errors.New("schemas: bad json")

// JSONError is malformed or unacceptable JSON input; Pointer says where.
// errors.Is(err, ErrBadJSON) holds for it.
type JSONError struct {
	Pointer string
	Msg     string
}

func (e *JSONError) Error() string        { return "schemas: bad json at " + e.Pointer + ": " + e.Msg }
func (e *JSONError) Is(target error) bool { return target == ErrBadJSON }

// decimal is a JSON number literal taken apart: value = (-1)^neg * digits * 10^exp,
// digits without leading or trailing zeros ("" for zero).
type decimal struct {
	neg    bool
	digits string
	exp    int
}

// parseDecimal splits a JSON number literal. It never builds big numbers, so
// a literal like 1e999999999 costs nothing before it is refused.
func parseDecimal(s string) (decimal, error) {
	var d decimal
	if len(s) > maxNumberLen {
		return d, fmt.Errorf("number literal longer than %d characters", maxNumberLen)
	}
	i := 0
	if i < len(s) && s[i] == '-' {
		d.neg = true
		i++
	}
	start := i
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	intPart := s[start:i]
	frac := ""
	if i < len(s) && s[i] == '.' {
		i++
		fs := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		frac = s[fs:i]
		if frac == "" {
			return d, fmt.Errorf("malformed number %q", s)
		}
	}
	exp := 0
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		eneg := false
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			eneg = s[i] == '-'
			i++
		}
		es := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if exp < 1e6 {
				exp = exp*10 + int(s[i]-'0')
			}
			i++
		}
		if es == i {
			return d, fmt.Errorf("malformed number %q", s)
		}
		if exp > maxExpLiteral {
			return d, fmt.Errorf("number %s is out of range (exponent beyond ±%d)", s, maxExpLiteral)
		}
		if eneg {
			exp = -exp
		}
	}
	if intPart == "" || i != len(s) || (len(intPart) > 1 && intPart[0] == '0') {
		return d, fmt.Errorf("malformed number %q", s)
	}
	digits := strings.TrimLeft(intPart+frac, "0")
	exp -= len(frac)
	n := len(digits)
	digits = strings.TrimRight(digits, "0")
	exp += n - len(digits)
	d.digits = digits
	d.exp = exp
	if digits == "" {
		d.exp = 0
		return d, nil
	}
	if top := exp + len(digits) - 1; top > maxExp10 || top < minExp10 {
		return d, fmt.Errorf("number %s is out of range", s)
	}
	return d, nil
}

// checkNumber refuses numbers that cannot be held: malformed, too long, or
// with a magnitude outside float64 range.
func checkNumber(n json.Number) error {
	_, err := canonicalNumber(n)
	return err
}

// Integer range of CBOR major types 0 and 1: [-2^64, 2^64-1].
var (
	cborIntMax = new(big.Int).SetUint64(math.MaxUint64)
	cborIntMin = new(big.Int).Neg(new(big.Int).Lsh(big.NewInt(1), 64))
)

// canonicalNumber maps a JSON number literal to the Go value whose canonical
// CBOR encoding represents it:
//   - an integral value in [-2^64, 2^64-1] becomes a CBOR integer (1, 1.0, 1e0
//     and 10e-1 are all the integer 1; -0 is 0);
//   - anything else is rounded to the nearest float64; if that float64 is
//     integral and in integer range it is again a CBOR integer (so every
//     CBOR float FromJSON writes is non-integral or outside integer range, and
//     ToJSON -> FromJSON reproduces the same bytes);
//   - the encoder writes floats in their shortest exact IEEE 754 form.
func canonicalNumber(n json.Number) (any, error) {
	d, err := parseDecimal(string(n))
	if err != nil {
		return nil, err
	}
	if d.digits == "" {
		return uint64(0), nil
	}
	if d.exp >= 0 && len(d.digits)+d.exp <= 20 {
		if v, ok := smallInt(d); ok {
			return v, nil
		}
		i, _ := new(big.Int).SetString(d.digits+strings.Repeat("0", d.exp), 10)
		if d.neg {
			i.Neg(i)
		}
		if i.Cmp(cborIntMax) <= 0 && i.Cmp(cborIntMin) >= 0 {
			return *i, nil
		}
	}
	f, err := strconv.ParseFloat(string(n), 64)
	if err != nil || math.IsInf(f, 0) {
		return nil, fmt.Errorf("number %s is out of float64 range", n)
	}
	return canonicalFloat(f), nil
}

// smallInt handles the common case of an integer that fits uint64/int64.
func smallInt(d decimal) (any, bool) {
	if len(d.digits)+d.exp > 19 {
		return nil, false
	}
	u, err := strconv.ParseUint(d.digits, 10, 64)
	if err != nil {
		return nil, false
	}
	for i := 0; i < d.exp; i++ {
		u *= 10
	}
	if !d.neg {
		return u, true
	}
	if u > 1<<63 {
		return nil, false
	}
	return -int64(u-1) - 1, true
}

// canonicalFloat turns an integral float64 within CBOR integer range into an
// integer and leaves other values as float64. -0.0 becomes 0.
func canonicalFloat(f float64) any {
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
		return f
	}
	switch {
	case f >= 0 && f < 1<<64:
		return uint64(f)
	case f < 0 && f >= -(1<<63):
		return int64(f)
	case f < 0 && f >= -(1<<64):
		i, _ := big.NewFloat(f).Int(nil)
		return *i
	}
	return f
}

// floatIsCanonical reports whether a decoded CBOR float is one FromJSON
// could have written: finite, and non-integral or outside integer range.
func floatIsCanonical(f float64) bool {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return false
	}
	_, isFloat := canonicalFloat(f).(float64)
	return isFloat
}
