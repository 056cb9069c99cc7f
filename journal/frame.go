package journal

import (
	"unicode/utf8"

	"github.com/aos-kernel/aos/internal/canon"
)

// A frame (the value stored under one frame key) is the canonical CBOR array
// of its records, each the map {"seq": uint, "body": bytes, "kind": text}
// (keys in canonical order). Every commit encodes one and every read of the
// journal (replay at open, trace, journal listing) decodes them all, so both
// directions are written by hand; TestFrameCodecMatchesLibrary and
// FuzzDecodeFrame hold them to the library's bytes and values.

// EncodeFrame is schemas.Marshal(recs): the bytes a backend stores for one
// Append.
func EncodeFrame(recs []Record) []byte {
	n := 9
	for i := range recs {
		n += 1 + 4 + 9 + 5 + 9 + len(recs[i].Body) + 5 + 9 + len(recs[i].Kind)
	}
	b := make([]byte, 0, n)
	b = canon.AppendArray(b, uint64(len(recs)))
	for i := range recs {
		r := &recs[i]
		b = append(b, 0xa3, 0x63, 's', 'e', 'q')
		b = canon.AppendUint(b, r.Seq)
		b = canon.AppendBytesOrNull(append(b, 0x64, 'b', 'o', 'd', 'y'), r.Body)
		b = canon.AppendText(append(b, 0x64, 'k', 'i', 'n', 'd'), string(r.Kind))
	}
	return b
}

// decodeFrameFast decodes a frame laid out exactly as EncodeFrame writes it.
// It copies v once and the records' bodies share that copy (capped, so an
// append to one cannot overwrite the next). ok is false for anything else,
// and the caller falls back to the library decoder, which says what is
// wrong.
func decodeFrameFast(v []byte) (recs []Record, ok bool) {
	buf := append([]byte(nil), v...)
	maj, n, i, ok := canon.Head(buf, 0)
	if !ok || maj != 4 || n > uint64(len(buf)) {
		return nil, false
	}
	recs = make([]Record, n)
	for k := range recs {
		if i+5 > len(buf) || string(buf[i:i+5]) != "\xa3\x63seq" {
			return nil, false
		}
		var seq uint64
		if maj, seq, i, ok = canon.Head(buf, i+5); !ok || maj != 0 {
			return nil, false
		}
		if i+5 > len(buf) || string(buf[i:i+5]) != "\x64body" {
			return nil, false
		}
		var blen uint64
		if maj, blen, i, ok = canon.Head(buf, i+5); !ok || maj != 2 || blen > uint64(len(buf)-i) {
			return nil, false
		}
		body := buf[i : i+int(blen) : i+int(blen)]
		i += int(blen)
		if i+5 > len(buf) || string(buf[i:i+5]) != "\x64kind" {
			return nil, false
		}
		var klen uint64
		if maj, klen, i, ok = canon.Head(buf, i+5); !ok || maj != 3 || klen > uint64(len(buf)-i) || !utf8.Valid(buf[i:i+int(klen)]) {
			return nil, false
		}
		recs[k] = Record{Seq: seq, Kind: internKind(buf[i : i+int(klen)]), Body: body}
		i += int(klen)
	}
	return recs, i == len(buf)
}

// internKind returns the constant for a known kind, so decoding a frame
// allocates no strings.
func internKind(b []byte) Kind {
	for _, k := range [...]Kind{KindEvent, KindStep, KindIntent, KindReceipt, KindDrop, KindFrame, KindManifest, KindCheckpoint, KindSnapshot, KindFault, KindConfig, KindRecover, KindWorld, KindModule, KindRetire, KindCancel, KindMove} {
		if string(b) == string(k) {
			return k
		}
	}
	return Kind(b)
}
