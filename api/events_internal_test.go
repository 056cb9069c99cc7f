package api

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// The hand-written answer of POST /v1/events is byte for byte what
// encoding/json writes for the map it replaced.
func TestEventsAnswerIsEncodingJSONs(t *testing.T) {
	enc := func(v any) []byte {
		var b bytes.Buffer
		e := json.NewEncoder(&b)
		e.SetEscapeHTML(false)
		if err := e.Encode(v); err != nil {
			t.Fatal(err)
		}
		return b.Bytes()
	}
	parked := []kernel.Target{{Workflow: "w@1", Key: schemas.MustMarshal("a<b>")}, {Workflow: "u@1"}}
	for _, res := range [][]kernel.Ingested{
		{{Seq: 0}},
		{{Seq: 2}},
		{{Seq: 17, Duplicate: true}},
		{{Seq: 1<<64 - 1}},
		{{Seq: 3}, {Seq: 4, Duplicate: true}, {Seq: 5}},
		{{Seq: 6, Parked: parked}},
		{{Seq: 7}, {Seq: 8, Parked: parked[:1]}, {Seq: 9, Parked: parked}},
	} {
		if len(res) == 1 {
			m := map[string]any{"seq": res[0].Seq, "duplicate": res[0].Duplicate}
			if len(res[0].Parked) > 0 {
				var ps []map[string]any
				for _, p := range res[0].Parked {
					ps = append(ps, map[string]any{"workflow": p.Workflow, "key": json.RawMessage(records.KeyJSON(p.Key))})
				}
				m["parked"] = ps
			}
			want := enc(m)
			if got := eventsAnswer(res, false); !bytes.Equal(got, want) {
				t.Errorf("single %v: %q, want %q", res, got, want)
			}
		}
		seqs, dups := make([]uint64, len(res)), make([]bool, len(res))
		var ps []map[string]any
		for i, x := range res {
			seqs[i], dups[i] = x.Seq, x.Duplicate
			for _, p := range x.Parked {
				ps = append(ps, map[string]any{"event": i, "workflow": p.Workflow, "key": json.RawMessage(records.KeyJSON(p.Key))})
			}
		}
		m := map[string]any{"seqs": seqs, "duplicates": dups}
		if ps != nil {
			m["parked"] = ps
		}
		want := enc(m)
		if got := eventsAnswer(res, true); !bytes.Equal(got, want) {
			t.Errorf("batch %v: %q, want %q", res, got, want)
		}
	}
}

// BenchmarkEventsAnswer: the answer of one event, by hand (hand) and as
// the map it replaced through writeJSON's encoder (map).
func BenchmarkEventsAnswer(b *testing.B) {
	res := []kernel.Ingested{{Seq: 123456}}
	var buf bytes.Buffer
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			buf.Write(eventsAnswer(res, false))
		}
	})
	b.Run("map", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			buf.Reset()
			e := json.NewEncoder(&buf)
			e.SetEscapeHTML(false)
			_ = e.Encode(map[string]any{"seq": res[0].Seq, "duplicate": res[0].Duplicate})
		}
	})
}
