package kernel_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

// readAheadModes are the three ways replay can read the journal: the loop
// reading and decoding it itself (read-ahead off), the reader and the
// prefetcher in lockstep with the loop, and both running free.
var readAheadModes = []struct {
	name string
	set  func() (undo func())
}{
	{"off", kernel.ReadAheadOff},
	{"lockstep", kernel.ReadAheadLockstep},
	{"free", func() func() { return func() {} }},
}

// tamperedLog is a journal port whose reads see one record changed: its
// body replaced, or (body nil) the read failing there as on a frame that
// does not decode. The journal itself is untouched.
type tamperedLog struct {
	kernel.Log
	seq  uint64
	body []byte
}

func (l tamperedLog) Read(from uint64, fn func(journal.Record) (bool, error)) error {
	return l.Log.Read(from, func(r journal.Record) (bool, error) {
		if r.Seq == l.seq {
			if l.body == nil {
				return false, fmt.Errorf("%w: frame at seq %d does not decode", journal.ErrCorrupt, r.Seq)
			}
			r.Body = l.body
		}
		return fn(r)
	})
}

// countingProgress counts the records replay reports.
type countingProgress struct{ n uint64 }

func (p *countingProgress) start(string, uint64) kernel.ProgressBar { return p }
func (p *countingProgress) Add(n uint64)                            { p.n += n }
func (*countingProgress) Finish()                                   {}

// readAheadWorld is a closed on-disk counter world whose journal spans many
// of the reader's batches, and the records a test tampers with: a step and
// an event well inside the journal, neither on a batch boundary.
func readAheadWorld(t *testing.T) (h *harness, step, event journal.Record) {
	h = newHarness(t, 13, true)
	mustApply(t, h, counterManifest)
	ctx := context.Background()
	for i := range 400 {
		if _, err := h.w.Submit(ctx, countEvent(fmt.Sprintf("k%03d", i%150), 1)); err != nil {
			t.Fatal(err)
		}
	}
	if err := h.w.Close(); err != nil {
		t.Fatal(err)
	}
	h.w = nil
	if err := h.db.Journal().Read(1, func(r journal.Record) (bool, error) {
		switch {
		case r.Seq < 500 || r.Seq%64 == 0 || r.Seq%64 == 1:
		case r.Kind == journal.KindStep && step.Seq == 0:
			step = r
		case r.Kind == journal.KindEvent && step.Seq != 0 && event.Seq == 0:
			event = r
		}
		return true, nil
	}); err != nil {
		t.Fatal(err)
	}
	if step.Seq == 0 || event.Seq == 0 {
		t.Fatal("the journal has no step or event past seq 500")
	}
	return h, step, event
}

// openFromGenesis replays h's journal, through log if not nil, with the
// read-ahead in one mode, and returns what Open said and how many records
// replay handled.
func openFromGenesis(t *testing.T, h *harness, log kernel.Log, mode func() func()) (*kernel.World, uint64, error) {
	t.Helper()
	undo := mode()
	defer undo()
	stores := h.db.Stores()
	if log != nil {
		stores.Journal = log
	}
	var p countingProgress
	cfg := h.config()
	cfg.FromGenesis = true
	cfg.Progress = p.start
	w, err := kernel.Open(stores, cfg)
	return w, p.n, err
}

// TestReplayReadAheadDiesTheSame: a journal replay must reject dies at the
// same record with the same report whether the loop reads the journal
// itself or the reader reads and decodes it ahead: a step or an event whose
// body does not decode, a step whose recorded result the loop does not
// re-produce, and a read that fails inside the journal (every record before
// it is replayed first).
func TestReplayReadAheadDiesTheSame(t *testing.T) {
	h, step, event := readAheadWorld(t)
	var sr records.StepRec
	if err := schemas.UnmarshalTrusted(step.Body, &sr); err != nil {
		t.Fatal(err)
	}
	forged := schemas.HashBytes([]byte("not the state"))
	sr.StateHash = &forged
	// A body that does not decode is reported with the decoder's error.
	decodeErr := func(body []byte, v any) string {
		err := schemas.UnmarshalTrusted(body, v)
		if err == nil {
			t.Fatalf("body %x decodes", body)
		}
		return err.Error()
	}
	badStep, badEvent := []byte{0xa1, 0xff}, []byte{0x18}
	stepErr, eventErr := decodeErr(badStep, &records.StepRec{}), decodeErr(badEvent, &records.EventRec{})
	cases := []struct {
		name string
		log  tamperedLog
		want func(err error) bool
	}{
		{"step does not decode", tamperedLog{seq: step.Seq, body: badStep}, func(err error) bool {
			var re *kernel.ReplayError
			return errors.As(err, &re) && re.Seq == step.Seq && re.Kind == journal.KindStep && re.Msg == stepErr
		}},
		{"event does not decode", tamperedLog{seq: event.Seq, body: badEvent}, func(err error) bool {
			var re *kernel.ReplayError
			return errors.As(err, &re) && re.Seq == event.Seq && re.Kind == journal.KindEvent && re.Msg == eventErr
		}},
		{"step diverges", tamperedLog{seq: step.Seq, body: schemas.MustMarshal(&sr)}, func(err error) bool {
			var re *kernel.ReplayError
			return errors.As(err, &re) && re.Seq == step.Seq && re.Workflow == sr.Workflow &&
				bytes.Equal(re.Key, sr.Key) && re.Want == schemas.HashBytes(schemas.MustMarshal(&sr))
		}},
		{"read fails", tamperedLog{seq: step.Seq}, func(err error) bool {
			return errors.Is(err, journal.ErrCorrupt)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.log.Log = h.db.Journal()
			var first string
			var firstN uint64
			for i, m := range readAheadModes {
				w, n, err := openFromGenesis(t, h, c.log, m.set)
				if err == nil {
					w.Close()
					t.Fatalf("%s: replay of the tampered journal succeeded", m.name)
				}
				if !c.want(err) {
					t.Fatalf("%s: open = %v", m.name, err)
				}
				want := c.log.seq // the bad record is the last handled
				if c.log.body == nil {
					want-- // the read fails before handing it over
				}
				if n != want {
					t.Errorf("%s: replay handled %d records, want %d", m.name, n, want)
				}
				if i == 0 {
					first, firstN = err.Error(), n
					t.Logf("%s: %v", m.name, err)
				} else if err.Error() != first || n != firstN {
					t.Errorf("%s: %d records, %v\nwant as with the read-ahead off: %d records, %s", m.name, n, err, firstN, first)
				}
			}
		})
	}
}

// TestReplayReadAheadSameWorld: what replay computes does not depend on the
// read-ahead: the same journal replayed with it off, in lockstep and
// running free gives the same state, byte for byte.
func TestReplayReadAheadSameWorld(t *testing.T) {
	h, _, _ := readAheadWorld(t)
	var first []byte
	for i, m := range readAheadModes {
		w, n, err := openFromGenesis(t, h, nil, m.set)
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		s, err := w.State(context.Background())
		if err == nil {
			err = w.Close()
		}
		if err != nil {
			t.Fatalf("%s: %v", m.name, err)
		}
		data, err := snapshot.Encode(s)
		if err != nil {
			t.Fatal(err)
		}
		if n != s.Height || len(s.Workflows) == 0 {
			t.Fatalf("%s: replayed %d records to height %d, %d workflows", m.name, n, s.Height, len(s.Workflows))
		}
		if i == 0 {
			first = data
		} else if !bytes.Equal(data, first) {
			t.Errorf("%s: the replayed state differs from the one replayed with the read-ahead off", m.name)
		}
	}
}
