package progress

import (
	"io"
	"os"
	"time"

	"github.com/cheggaaa/pb/v3"
	"golang.org/x/term"
)

// Bar is one operation's progress. Its methods are safe for concurrent use.
// Counts above 2^63-1 are not meaningful (the library counts in int64).
type Bar interface {
	// Set makes done the count.
	Set(done uint64)
	// Add adds n to the count.
	Add(n uint64)
	// Finish draws the final frame and ends the line. Later calls to any
	// method draw nothing.
	Finish()
}

// Reporter starts Bars on one writer. Its Bars are meant to run one after
// another: two live at once would redraw over each other on the same line.
type Reporter struct {
	w       io.Writer
	enabled bool
}

// refresh is how often a live Bar is redrawn, whatever the rate of Add.
const refresh = 200 * time.Millisecond

// The templates are pb's: {{string . "label"}} prints the Bar's label as
// data (never parsed as a template), {{counters .}} prints "done / total", or
// done alone when the total is unknown.
const (
	knownTotal   = `{{string . "label"}} {{counters . }} {{bar . }} {{percent . }} {{etime . }}`
	unknownTotal = `{{string . "label"}} {{cycle . "-" "\\" "|" "/" }} {{counters . }} {{etime . }}`
)

// maxWidth keeps a bar readable on a very wide terminal.
const maxWidth = 100

// New returns a Reporter that draws on w when enabled is true. The caller
// decides enabled (usually with Enabled): an enabled Reporter treats w as a
// terminal and redraws its line in place with carriage returns. A nil w draws
// nothing, as if disabled, rather than falling back to some other stream.
func New(w io.Writer, enabled bool) *Reporter {
	return &Reporter{w: w, enabled: enabled && w != nil}
}

// Start begins a Bar labelled label that counts towards total; a total of 0
// means unknown, and the Bar shows a spinner and the count alone. A disabled
// (or nil) Reporter returns a Bar that does nothing.
func (r *Reporter) Start(label string, total uint64) Bar {
	if r == nil || !r.enabled {
		return nop{}
	}
	tmpl := knownTotal
	if total == 0 {
		tmpl = unknownTotal
	}
	b := pb.New64(int64(total)).
		SetTemplateString(tmpl).
		Set("label", label).
		Set(pb.Terminal, true).
		Set(pb.ReturnSymbol, "\r").
		SetMaxWidth(maxWidth).
		SetRefreshRate(refresh).
		SetWriter(r.w)
	b.Start()
	return &bar{pb: b}
}

// Enabled reports whether progress should be drawn on f: only when f is a
// terminal and the user did not ask for JSON output.
func Enabled(f *os.File, jsonOutput bool) bool {
	if jsonOutput || f == nil {
		return false
	}
	return term.IsTerminal(int(f.Fd()))
}

type bar struct{ pb *pb.ProgressBar }

func (b *bar) Set(done uint64) { b.pb.SetCurrent(int64(done)) }
func (b *bar) Add(n uint64)    { b.pb.Add64(int64(n)) }
func (b *bar) Finish()         { b.pb.Finish() }

// nop is a disabled Reporter's Bar: an empty struct in an interface needs no
// allocation, and its methods are empty.
type nop struct{}

func (nop) Set(uint64) {}
func (nop) Add(uint64) {}
func (nop) Finish()    {}
