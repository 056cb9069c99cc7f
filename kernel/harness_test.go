package kernel_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/aos-kernel/aos/badgerdb/worldstore"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
)

// stepClock advances by a fixed step on each stamp: deterministic time.
type stepClock struct{ now uint64 }

func (c *stepClock) NowNs() uint64 { c.now += 1000; return c.now }

// seededEntropy is deterministic entropy from a PCG stream.
type seededEntropy struct{ r *rand.Rand }

func newEntropy(seed uint64) *seededEntropy {
	return &seededEntropy{r: rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))}
}

func (e *seededEntropy) Fill(p []byte) {
	for i := 0; i < len(p); i += 8 {
		var b [8]byte
		binary.LittleEndian.PutUint64(b[:], e.r.Uint64())
		copy(p[i:], b[:])
	}
}

func decodeMap(t testing.TB, b []byte) map[string]any {
	if b == nil {
		return nil
	}
	v, err := schemas.Decode(b)
	if err != nil {
		panic(err)
	}
	return v.(map[string]any)
}

// countFields is the counter's event ({key, by}) and state ({count}) as a
// typed builtin would decode them. Step inputs are canonical and validated by
// the kernel, so it decodes them as trusted bytes: schemas.Decode would
// re-check canonical form at several times the cost.
type countFields struct {
	Key   string `cbor:"key"`
	By    int64  `cbor:"by"`
	Count int64  `cbor:"count"`
}

func decodeCount(b []byte) countFields {
	var c countFields
	if err := schemas.UnmarshalTrusted(b, &c); err != nil {
		panic(err)
	}
	return c
}

func toInt(v any) int64 {
	switch n := v.(type) {
	case uint64:
		return int64(n)
	case int64:
		return n
	}
	panic(fmt.Sprintf("not an int: %T", v))
}

// testBuiltins registers the step functions the scenario manifests use.
func testBuiltins() *modules.Builtins {
	b := modules.NewBuiltins()
	// counter: state {count}, event {key, by}; special "by" values misbehave.
	b.MustRegister("test/counter", "test/counter@1", "step", func(in *modules.Input) (*modules.Output, error) {
		ev := decodeCount(in.Event.Value)
		by := ev.By
		var count int64
		if in.State != nil {
			count = decodeCount(in.State).Count
		}
		switch by {
		case 0:
			return &modules.Output{State: nil}, nil
		case 13:
			panic("unlucky")
		case 14:
			return &modules.Output{State: schemas.MustMarshal(map[string]any{"count": "many"})}, nil
		case 15:
			return &modules.Output{State: []byte{0xa1, 0x65, 'c', 'o', 'u', 'n', 't', 0x18, 0x01}}, nil
		case 16:
			return nil, errors.New("refusing")
		case 17:
			out := &modules.Output{State: in.State}
			for i := 0; i < 100; i++ {
				out.DomainEvents = append(out.DomainEvents, modules.EventOut{Schema: "com.test/Total@1",
					Value: schemas.MustMarshal(map[string]any{"key": ev.Key, "count": count})})
			}
			return out, nil
		}
		count += by
		out := &modules.Output{State: schemas.MustMarshal(map[string]any{"count": count})}
		if count >= 10 {
			out.DomainEvents = append(out.DomainEvents, modules.EventOut{Schema: "com.test/Total@1",
				Value: schemas.MustMarshal(map[string]any{"key": ev.Key, "count": count})})
		}
		return out, nil
	})
	// audit: unkeyed, counts Total events.
	b.MustRegister("test/audit", "test/audit@1", "step", func(in *modules.Input) (*modules.Output, error) {
		var n int64
		if in.State != nil {
			n = toInt(decodeMap(nil, in.State)["seen"])
		}
		return &modules.Output{State: schemas.MustMarshal(map[string]any{"seen": n + 1})}, nil
	})
	// notes: keyed by note_id inside a variant; remembers the last tag and counts.
	b.MustRegister("test/notes", "test/notes@1", "step", func(in *modules.Input) (*modules.Output, error) {
		ev := decodeMap(nil, in.Event.Value)
		var n int64
		if in.State != nil {
			n = toInt(decodeMap(nil, in.State)["events"])
		}
		if ev["$tag"] == "Archived" {
			return &modules.Output{State: nil}, nil
		}
		return &modules.Output{State: schemas.MustMarshal(map[string]any{"events": n + 1, "last": ev["$tag"]})}, nil
	})
	// ctx: records what the context said.
	b.MustRegister("test/ctx", "test/ctx@1", "step", func(in *modules.Input) (*modules.Output, error) {
		c := decodeMap(nil, in.Ctx)
		return &modules.Output{State: schemas.MustMarshal(map[string]any{
			"cell_mode": c["cell_mode"], "height": c["journal_height"], "now": c["now_ns"],
			"entropy_len": uint64(len(c["entropy"].([]byte))), "key_matches": string(c["key"].([]byte)) == string(in.Event.Key),
		})}, nil
	})
	return b
}

// dirWorld is a world over its own Badger directory, the way a world
// directory holds one: Close closes the world, then the store.
type dirWorld struct {
	*kernel.World
	db *worldstore.Store
}

// openDir opens the world stored in dir (creating it if needed).
func openDir(dir string, cfg kernel.Config) (*dirWorld, error) {
	db, err := worldstore.Open(dir)
	if err != nil {
		return nil, err
	}
	w, err := kernel.Open(db.Stores(), cfg)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &dirWorld{World: w, db: db}, nil
}

func (d *dirWorld) Close() error {
	return errors.Join(d.World.Close(), d.db.Close())
}

type harness struct {
	t        testing.TB
	db       *worldstore.Store
	dir      string
	w        *kernel.World
	clock    *stepClock
	entropy  *seededEntropy
	builtins *modules.Builtins
	mem      *kernel.Stores // when set, the world runs on these, not on db
	lastSeen uint64
	extra    func(*kernel.Config)
	// uncheckedJournal: the test writes records no kernel would (a forged
	// journal), so the journal check at cleanup is skipped.
	uncheckedJournal bool
}

func newHarness(t testing.TB, seed uint64, onDisk bool) *harness {
	return newHarnessWith(t, seed, onDisk, nil)
}

// newHarnessWith is newHarness with setup run before the world opens, to
// register builtins or set h.extra (configuration the world opens with).
func newHarnessWith(t testing.TB, seed uint64, onDisk bool, setup func(h *harness)) *harness {
	h := &harness{t: t, clock: &stepClock{}, entropy: newEntropy(seed), builtins: testBuiltins()}
	if setup != nil {
		setup(h)
	}
	var err error
	if onDisk {
		h.dir = t.TempDir()
		h.db, err = worldstore.Open(h.dir)
	} else {
		h.db, err = worldstore.OpenInMemory()
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if h.w != nil {
			h.w.Close()
		}
		if !h.uncheckedJournal {
			stores := h.db.Stores()
			if h.mem != nil {
				stores = *h.mem
			}
			checkJournal(t, stores)
		}
		h.db.Close()
	})
	h.open()
	return h
}

func (h *harness) config() kernel.Config {
	// No input wall-clock budget unless a test asks: what a test's
	// cascade does must not depend on how fast the machine runs it.
	c := kernel.Config{Clock: h.clock, Entropy: h.entropy, Builtins: h.builtins, InputTimeout: -1}
	if h.extra != nil {
		h.extra(&c)
	}
	return c
}

func (h *harness) open() {
	var stores kernel.Stores
	if h.mem != nil {
		stores = *h.mem
	} else {
		stores = h.db.Stores()
	}
	w, err := kernel.Open(stores, h.config())
	if err != nil {
		h.t.Fatalf("open world: %v", err)
	}
	h.w = w
}

func (h *harness) reopen() {
	if err := h.w.Close(); err != nil {
		h.t.Fatal(err)
	}
	h.w = nil
	if h.dir != "" { // on disk: close and reopen the store too
		if err := h.db.Close(); err != nil {
			h.t.Fatal(err)
		}
		db, err := worldstore.Open(h.dir)
		if err != nil {
			h.t.Fatal(err)
		}
		h.db = db
	}
	h.open()
}

func (h *harness) applyJSON(src string) (*kernel.ApplyResult, error) {
	dir := h.t.TempDir()
	p := filepath.Join(dir, "manifest.json")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		h.t.Fatal(err)
	}
	m, err := manifest.Load(p)
	if err != nil {
		return nil, err
	}
	return h.w.Apply(context.Background(), m, false)
}

func (h *harness) send(schema, value string) (uint64, error) {
	seqs, err := h.w.Submit(context.Background(), kernel.Event{Schema: schema, JSON: []byte(value)})
	if err != nil {
		return 0, err
	}
	return seqs[0], nil
}
