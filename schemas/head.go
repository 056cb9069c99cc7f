package schemas

import "encoding/binary"

// AppendHead appends the shortest CBOR head of major type major (0–7) with
// argument n, as canonical encoding requires. The hand-written encoders of
// hot records (kernel journal records, cell index nodes) share it.
func AppendHead(b []byte, major byte, n uint64) []byte {
	m := major << 5
	switch {
	case n < 24:
		return append(b, m|byte(n))
	case n <= 0xff:
		return append(b, m|24, byte(n))
	case n <= 0xffff:
		return binary.BigEndian.AppendUint16(append(b, m|25), uint16(n))
	case n <= 0xffffffff:
		return binary.BigEndian.AppendUint32(append(b, m|26), uint32(n))
	}
	return binary.BigEndian.AppendUint64(append(b, m|27), n)
}

// AppendText appends s as a CBOR text string.
func AppendText(b []byte, s string) []byte {
	return append(AppendHead(b, 3, uint64(len(s))), s...)
}

// AppendByteString appends v as a CBOR byte string, or null when v is nil,
// as the canonical encoder does for a nil slice that is not omitempty.
func AppendByteString(b, v []byte) []byte {
	if v == nil {
		return append(b, 0xf6)
	}
	return append(AppendHead(b, 2, uint64(len(v))), v...)
}
