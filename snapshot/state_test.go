package snapshot_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/snapshot"
)

func sample() *snapshot.State {
	key := schemas.MustMarshal("o1")
	return &snapshot.State{
		Version: snapshot.Version, Height: 10, Logical: 99,
		Manifest:  &snapshot.Manifest{Hash: schemas.HashBytes([]byte("m")), Source: schemas.HashBytes([]byte("src")), Artifacts: []schemas.Hash{}},
		Workflows: []snapshot.Workflow{{Name: "a", Root: schemas.HashBytes([]byte("r")), Cells: 3}, {Name: "b"}},
		Instances: []snapshot.Instance{
			{Workflow: "a", Key: key, Status: snapshot.StatusWaiting},
			{Workflow: "a", Key: schemas.MustMarshal("o2"), Status: snapshot.StatusFailed, Fault: &snapshot.Fault{Seq: 7, Input: 6, Reason: "boom"}},
		},
		Intents: []snapshot.Intent{{Intent: records.IntentRec{Hash: schemas.HashBytes([]byte("i")),
			IntentID: records.IntentID{OriginWorkflow: "a", OriginKey: key, Effect: "e", Params: schemas.MustMarshal(1)}}, Frames: 2, LastFrame: 5}},
		Settled:     []snapshot.Settled{{Intent: schemas.HashBytes([]byte("s1")), Effect: "e", Seq: 3}, {Intent: schemas.HashBytes([]byte("s2")), Effect: "e", Seq: 3}},
		Idempotency: []snapshot.Idem{{Key: make([]byte, 16), Seq: 2, Logical: 5, Sum: make([]byte, 16)}},
		Epochs:      snapshot.Epochs{Known: []snapshot.KnownSchema{}, Changes: []snapshot.Epoch{}},
	}
}

func TestRoundTripAndCanonical(t *testing.T) {
	s := sample()
	b, err := snapshot.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if d := snapshot.Diff(s, got); d != "" {
		t.Fatalf("round trip: %s", d)
	}
	again, _ := snapshot.Encode(got)
	if string(again) != string(b) {
		t.Fatal("encode(decode(b)) != b")
	}
	// The same map with a non-shortest integer is refused.
	var v map[string]any
	if err := schemas.UnmarshalTrusted(b, &v); err != nil {
		t.Fatal(err)
	}
	long := append([]byte{}, b...)
	i := strings.Index(string(long), "height")
	long = append(long[:i+6], append([]byte{0x18, 10}, long[i+7:]...)...)
	if _, err := snapshot.Decode(long); !errors.Is(err, snapshot.ErrInvalid) {
		t.Fatalf("non-canonical bytes: %v", err)
	}
}

func TestCheckRefuses(t *testing.T) {
	cases := map[string]func(s *snapshot.State){
		"version":              func(s *snapshot.State) { s.Version = 2 },
		"workflows not sorted": func(s *snapshot.State) { s.Workflows[0], s.Workflows[1] = s.Workflows[1], s.Workflows[0] },
		"root without cells":   func(s *snapshot.State) { s.Workflows[0].Cells = 0 },
		"instances not sorted": func(s *snapshot.State) { s.Instances[0], s.Instances[1] = s.Instances[1], s.Instances[0] },
		"failed without fault": func(s *snapshot.State) { s.Instances[1].Fault = nil },
		"unknown status":       func(s *snapshot.State) { s.Instances[1].Status = "running" },
		"waiting, no intent":   func(s *snapshot.State) { s.Intents = nil },
		"intent, not waiting":  func(s *snapshot.State) { s.Instances = s.Instances[1:] },
		"settled order":        func(s *snapshot.State) { s.Settled[0].Seq = 4 },
		"settled twice":        func(s *snapshot.State) { s.Settled[1].Intent = s.Settled[0].Intent },
		"idempotency key size": func(s *snapshot.State) { s.Idempotency[0].Key = []byte{1} },
		"parked, none parked": func(s *snapshot.State) {
			s.Instances = append(s.Instances, snapshot.Instance{Workflow: "b", Status: snapshot.StatusParked})
		},
		"parked with a fault": func(s *snapshot.State) {
			s.Instances[1].Status, s.Instances[1].Parked = snapshot.StatusParked, []snapshot.Delivery{{Seq: 8}}
		},
		"empty parked list": func(s *snapshot.State) { s.Instances[1].Parked = []snapshot.Delivery{} },
		"empty aside list":  func(s *snapshot.State) { s.Aside = []snapshot.Aside{} },
		"aside not sorted": func(s *snapshot.State) {
			s.Aside = []snapshot.Aside{{Module: "m2", Workflows: []string{}}, {Module: "m1", Workflows: []string{}}}
		},
		"aside workflow twice": func(s *snapshot.State) {
			s.Aside = []snapshot.Aside{{Module: "m1", Workflows: []string{"a"}}, {Module: "m2", Workflows: []string{"a"}}}
		},
	}
	for name, breakIt := range cases {
		s := sample()
		breakIt(s)
		if _, err := snapshot.Encode(s); !errors.Is(err, snapshot.ErrInvalid) {
			t.Errorf("%s: encode gave %v, want ErrInvalid", name, err)
		}
	}
}

func TestDiffNamesFirstDifference(t *testing.T) {
	a, b := sample(), sample()
	if d := snapshot.Diff(a, b); d != "" {
		t.Fatalf("equal states differ: %s", d)
	}
	b.Workflows[1].Root, b.Workflows[1].Cells = schemas.HashBytes([]byte("x")), 1
	b.Idempotency[0].Seq = 3
	if d := snapshot.Diff(a, b); !strings.HasPrefix(d, "workflow b:") {
		t.Fatalf("diff: %q", d)
	}
	b = sample()
	b.Intents[0].Frames = 3
	if d := snapshot.Diff(a, b); !strings.Contains(d, "intent in flight "+a.Intents[0].Intent.Hash.String()) {
		t.Fatalf("diff: %q", d)
	}
}

// TestParkedAndAsideRoundTrip: parked events (of a failed instance and of
// one held by a module set aside) and the modules set aside survive a
// round trip; a state without them encodes to the bytes the code before
// parking wrote (the hash below was taken with that code, commit 4eba029),
// so older snapshots still decode and the same state gives the same bytes.
func TestParkedAndAsideRoundTrip(t *testing.T) {
	b, err := snapshot.Encode(sample())
	if err != nil {
		t.Fatal(err)
	}
	if got := schemas.HashBytes(b).String(); got != "sha256:de8226c130b424ea36798b0608befc758d0bf1a4810705cb7572ab71b74f8db8" {
		t.Fatalf("a snapshot without parked events or modules set aside encodes to %s, not the bytes it had before parking", got)
	}
	s := sample()
	d := snapshot.Delivery{Seq: 9, Schema: "ev@1", Value: schemas.MustMarshal(1), Stamp: records.Stamp{LogicalNs: 4, Entropy: []byte{1}}, Depth: 1}
	s.Instances[1].Parked = []snapshot.Delivery{d, d}
	s.Instances[1].Parked[1].Seq = 11
	s.Instances = append(s.Instances, snapshot.Instance{Workflow: "b", Key: schemas.MustMarshal("x"), Status: snapshot.StatusParked,
		Parked: []snapshot.Delivery{d}})
	s.Aside = []snapshot.Aside{{Module: "mod@1", Hash: schemas.HashBytes([]byte("mod")), Seq: 8, Reason: "timed out", Workflows: []string{"b"}}}
	b, err = snapshot.Encode(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := snapshot.Decode(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := snapshot.Diff(s, got); diff != "" {
		t.Fatalf("round trip: %s", diff)
	}
	if len(got.Instances[2].Parked) != 1 || got.Aside[0].Workflows[0] != "b" || got.Instances[1].Parked[1].Seq != 11 {
		t.Fatalf("decoded %+v", got)
	}
	got.Aside[0].Reason = "other"
	if diff := snapshot.Diff(s, got); !strings.Contains(diff, "module set aside mod@1") {
		t.Fatalf("diff of the modules set aside: %q", diff)
	}
}
