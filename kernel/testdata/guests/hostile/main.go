//go:build wasip1

// Command hostile is a wasm workflow module for the kernel's tests: one keyed
// workflow whose event says how to misbehave. It also keeps a counter in a
// global, which a warm instance carries from step to step, so the tests can
// check that outputs stay a function of the journal.
package main

import (
	crand "crypto/rand"
	"os"
	"strings"
	"time"

	"github.com/aos-kernel/aos/sdk"
)

// State is test/HostileState@1.
type State struct {
	Calls  uint64 `cbor:"calls"`  // steps this cell took
	Global uint64 `cbor:"global"` // the module-wide counter after this step
	Note   string `cbor:"note,omitempty"`
}

// Event is test/HostileEvent@1.
type Event struct {
	Key string `cbor:"key"`
	Act string `cbor:"act"`
}

var (
	mod    = sdk.NewModule("test/hostile")
	global uint64 // survives between steps of one instance
	sink   [][]byte
)

func init() {
	sdk.Workflow(mod, "step", step)
	sdk.Export(mod)
}

func main() {}

func step(c *sdk.Ctx, s *State, ev Event) (*State, error) {
	global++
	if s == nil {
		s = &State{}
	}
	s.Calls++
	s.Global = global
	switch ev.Act {
	case "count":
	case "clock":
		s.Note = time.Now().String()
	case "random":
		b := make([]byte, 8)
		_, _ = crand.Read(b)
		s.Note = string(b[:0])
	case "file":
		if f, err := os.Open("/etc/hostname"); err == nil {
			f.Close()
			s.Note = "opened"
		}
	case "loop":
		for global > 0 {
			global++
		}
	case "alloc":
		for {
			sink = append(sink, make([]byte, 1<<20))
		}
	case "trap":
		var p *State
		s.Calls = p.Calls
	case "exit":
		os.Exit(3)
	case "sleep":
		time.Sleep(time.Millisecond)
	case "big":
		s.Note = strings.Repeat("x", 2<<20)
	}
	return s, nil
}
