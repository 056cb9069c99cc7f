package schemas

import "github.com/aos-kernel/aos/internal/canon"

// The hand-written encoders of hot records outside this module's internal
// tree (the kernel's journal records, receipts) append CBOR through these
// names; internal/canon is where the encoding lives.

// AppendHead appends the shortest CBOR head of major type major (0–7) with
// argument n, as canonical encoding requires.
func AppendHead(b []byte, major byte, n uint64) []byte { return canon.AppendHead(b, major, n) }

// AppendText appends s as a CBOR text string.
func AppendText(b []byte, s string) []byte { return canon.AppendText(b, s) }

// AppendByteString appends v as a CBOR byte string, or null when v is nil,
// as the canonical encoder does for a nil slice that is not omitempty.
func AppendByteString(b, v []byte) []byte { return canon.AppendBytesOrNull(b, v) }
