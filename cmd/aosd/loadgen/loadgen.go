package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The keyed counter of examples/manifests/counter: the default load.
const (
	CounterSchema   = "com.example/CountEvent@1"
	CounterWorkflow = "com.example/counter.step@1"
)

// Placeholders a template's text may hold (docs/CLI.md, aosd bench).
const (
	KeyPlaceholder = "{{key}}" // the event's key, e.g. k-17 (put it inside quotes)
	SeqPlaceholder = "{{seq}}" // the event's index in the run, 0-based (a JSON number)
)

// Config is one run.
type Config struct {
	Base  string // the daemon, e.g. http://127.0.0.1:7878
	Token string // its bearer token

	Events      int    // measured events (warm-up not included)
	Warmup      int    // events sent first, measured by nothing
	Batch       int    // events per request
	Concurrency int    // requests in flight
	Keys        int    // distinct keys, event i going to key i mod Keys
	KeyPrefix   string // keys are KeyPrefix + decimal index

	// Template is an event object, {"schema": ..., "value": ...}, with
	// KeyPlaceholder and SeqPlaceholder in its text; nil sends the keyed
	// counter's CountEvent with by 1.
	Template []byte

	// Effects sends the orders example's Created events instead, one order
	// per event (order KeyPrefix + index; Keys is not used), and serves the
	// charge each emits as an external executor: claim, sign, post the
	// receipt (effects.go).
	Effects bool

	// Settle bounds the wait for quiescence before verifying.
	Settle time.Duration

	// Client is how the events are posted: ClientLean ("" too) on one
	// connection per worker written and read on the worker's goroutine
	// (wire.go), ClientStd through net/http's Client as an ordinary Go
	// program posts them (std.go).
	Client string

	// HTTP, when set, sends every request; by default the events are
	// posted on one connection per worker (wire.go) and the other requests
	// go through a keep-alive http.Client.
	HTTP *http.Client
}

var keyPrefixRE = regexp.MustCompile(`^[A-Za-z0-9._-]{1,64}$`)

// Check says what is wrong with c, naming the flag.
func (c *Config) Check() error {
	switch {
	case c.Base == "":
		return errors.New("no daemon address")
	case c.Events < 1:
		return fmt.Errorf("--events %d: want at least 1", c.Events)
	case c.Warmup < 0:
		return fmt.Errorf("--warmup %d: want 0 or more", c.Warmup)
	case c.Batch < 1 || c.Batch > 10_000:
		return fmt.Errorf("--batch %d: want 1 to 10000 events per request", c.Batch)
	case c.Concurrency < 1 || c.Concurrency > 10_000:
		return fmt.Errorf("--concurrency %d: want 1 to 10000 requests in flight", c.Concurrency)
	case c.Keys < 1:
		return fmt.Errorf("--keys %d: want at least 1", c.Keys)
	case !keyPrefixRE.MatchString(c.KeyPrefix):
		return fmt.Errorf("--key-prefix %q: want 1 to 64 of A-Z a-z 0-9 . _ -", c.KeyPrefix)
	case c.Settle <= 0:
		return fmt.Errorf("--settle %s: want a positive duration", c.Settle)
	case c.Client != "" && c.Client != ClientLean && c.Client != ClientStd:
		return fmt.Errorf("--client %q: want %s (bench's own connections) or %s (Go's net/http client)", c.Client, ClientLean, ClientStd)
	}
	if c.Template != nil {
		if c.Effects {
			return errors.New("--effects and --template: give one (the effect mix sends the orders example's events)")
		}
		return checkTemplate(c.Template)
	}
	return nil
}

// checkTemplate checks that a template, filled in, is one event object.
func checkTemplate(t []byte) error {
	if !bytes.Contains(t, []byte(KeyPlaceholder)) && !bytes.Contains(t, []byte(SeqPlaceholder)) {
		return fmt.Errorf("template: holds neither %s nor %s: every event would be the same", KeyPlaceholder, SeqPlaceholder)
	}
	filled := fill(nil, t, "k-0", 0)
	var ev struct {
		Schema string          `json:"schema"`
		Value  json.RawMessage `json:"value"`
	}
	dec := json.NewDecoder(bytes.NewReader(filled))
	if err := dec.Decode(&ev); err != nil {
		return fmt.Errorf("template: filled in with key k-0 and seq 0 it is not a JSON object: %v", err)
	}
	if ev.Schema == "" || len(ev.Value) == 0 {
		return errors.New(`template: want an event object {"schema": NAME, "value": JSON}`)
	}
	return nil
}

// fill appends t with its placeholders replaced.
func fill(dst, t []byte, key string, seq int) []byte {
	for len(t) > 0 {
		i := bytes.Index(t, []byte("{{"))
		if i < 0 {
			return append(dst, t...)
		}
		dst = append(dst, t[:i]...)
		t = t[i:]
		switch {
		case bytes.HasPrefix(t, []byte(KeyPlaceholder)):
			dst = append(dst, key...)
			t = t[len(KeyPlaceholder):]
		case bytes.HasPrefix(t, []byte(SeqPlaceholder)):
			dst = strconv.AppendInt(dst, int64(seq), 10)
			t = t[len(SeqPlaceholder):]
		default:
			dst = append(dst, t[:2]...)
			t = t[2:]
		}
	}
	return dst
}

// Report is a run's figures, the JSON of `aosd bench --json`.
type Report struct {
	Target      string  `json:"target"`
	Events      int     `json:"events"`
	Warmup      int     `json:"warmup_events"`
	Requests    int     `json:"requests"`
	Batch       int     `json:"batch"`
	Concurrency int     `json:"concurrency"`
	Keys        int     `json:"keys"`
	Template    bool    `json:"template"`
	Client      string  `json:"client"`
	Seconds     float64 `json:"seconds"`
	EventsPerS  float64 `json:"events_per_second"`
	RequestsPS  float64 `json:"requests_per_second"`

	Latency Latency `json:"latency_ms"`

	// CPU seconds in the measured window, and per 1,000 measured events.
	// The daemon's is process_cpu_seconds_total from its /metrics (null
	// when it exports none); bench's own is getrusage.
	DaemonCPU      *float64  `json:"daemon_cpu_seconds"`
	DaemonCPUPer1k *float64  `json:"daemon_cpu_seconds_per_1k_events"`
	BenchCPU       float64   `json:"bench_cpu_seconds"`
	BenchCPUPer1k  float64   `json:"bench_cpu_seconds_per_1k_events"`
	GroupCommit    *Commits  `json:"group_commit"`
	Receipts       *Receipts `json:"receipts"` // the effect mix's; null without --effects
	Verify         Verify    `json:"verify"`
}

// Latency is a request's round trip in milliseconds, from the sorted list
// of every measured request's.
type Latency struct {
	P50  float64 `json:"p50"`
	P90  float64 `json:"p90"`
	P99  float64 `json:"p99"`
	Max  float64 `json:"max"`
	Mean float64 `json:"mean"`
}

// Commits is the journal's group commits in the measured window, from the
// daemon's aos_journal_flush_records and aos_journal_flush_duration_seconds
// histograms: every record journaled (events, steps, ...), not only events.
type Commits struct {
	Flushes       uint64  `json:"flushes"`
	Records       uint64  `json:"records"`
	MeanRecords   float64 `json:"mean_records_per_flush"`
	MeanFlushMs   float64 `json:"mean_flush_ms"`
	EventsPerFlsh float64 `json:"events_per_flush"`
}

// Verify is what the run checked after the load.
type Verify struct {
	OK         bool       `json:"ok"`
	Seqs       int        `json:"seqs"`         // distinct seqs answered, one per event
	Quiescent  bool       `json:"quiescent"`    // the world went quiescent within Settle
	Failed     int        `json:"failed"`       // failed instances found (at most one page)
	Keys       int        `json:"keys_checked"` // counter cells read
	Mismatches []Mismatch `json:"mismatches"`   // counter cells that do not hold what was sent
	Problem    string     `json:"problem,omitempty"`
}

// Mismatch is a counter cell whose count is not the number of events sent
// to its key (Got -1: no cell).
type Mismatch struct {
	Key    string `json:"key"`
	Want   int64  `json:"want"`
	Got    int64  `json:"got"`
	Status string `json:"status,omitempty"` // --effects: the order's status ("" no cell), not paid
}

// ErrVerify is the error of a run whose load went through but whose final
// state is not what was sent; the Report says where.
var ErrVerify = errors.New("loadgen: verification failed")

// Run sends the warm-up, then the measured events, then verifies. It
// returns the report with a nil error, or with ErrVerify (wrapped, naming
// the first problem) when verification failed, or a nil report and the
// error that stopped the load.
func Run(ctx context.Context, c Config) (*Report, error) {
	if err := c.Check(); err != nil {
		return nil, err
	}
	g := &gen{c: c, base: strings.TrimRight(c.Base, "/")}
	g.http = c.HTTP
	switch {
	case g.http != nil:
	case c.Client == ClientStd:
		g.http = stdClient(c.Concurrency)
	default:
		if w, ok := newWire(g.base, c.Token); ok {
			g.wires = []*wire{w}
			for len(g.wires) < c.Concurrency {
				w, _ = newWire(g.base, c.Token) // the same base: it cannot fail now
				g.wires = append(g.wires, w)
			}
			defer func() {
				for _, w := range g.wires {
					w.close()
				}
			}()
		}
		g.http = &http.Client{Transport: &http.Transport{
			MaxIdleConns: c.Concurrency + 8, MaxIdleConnsPerHost: c.Concurrency + 8,
			IdleConnTimeout: 90 * time.Second, DisableCompression: true,
		}}
	}
	g.seen = make(map[uint64]struct{}, c.Events+c.Warmup)
	rep := &Report{Target: g.base, Events: c.Events, Warmup: c.Warmup, Batch: c.Batch,
		Concurrency: c.Concurrency, Keys: c.Keys, Template: c.Template != nil, Client: ClientLean}
	if g.wires == nil {
		rep.Client = ClientStd
	}
	var ex *executor
	exDone := make(chan error, 1)
	if c.Effects {
		rep.Keys = c.Warmup + c.Events
		var err error
		if ex, err = g.newExecutor(ctx, c.Warmup+c.Events); err != nil {
			return nil, err
		}
		defer ex.forget(context.WithoutCancel(ctx))
		exCtx, stopEx := context.WithCancel(ctx)
		defer stopEx()
		go func() { exDone <- ex.run(exCtx, c.Concurrency) }()
	}

	if c.Warmup > 0 {
		if _, err := g.load(ctx, 0, c.Warmup, false); err != nil {
			return nil, fmt.Errorf("warm-up: %w", err)
		}
	}
	before, err := g.metrics(ctx)
	if err != nil {
		return nil, err
	}
	ru0 := selfCPU()
	t0 := time.Now()
	if ex != nil {
		ex.t0 = t0
		ex.measured.Store(true)
	}
	lat, err := g.load(ctx, c.Warmup, c.Events, true)
	if err != nil {
		return nil, err
	}
	elapsed := time.Since(t0)
	if ex != nil {
		if err := ex.wait(exDone, c.Settle); err != nil {
			return nil, err
		}
		rep.Receipts = ex.report()
	}
	ru1 := selfCPU()
	after, err := g.metrics(ctx)
	if err != nil {
		return nil, err
	}
	rep.Requests = len(lat)
	rep.Seconds = elapsed.Seconds()
	rep.EventsPerS = float64(c.Events) / rep.Seconds
	rep.RequestsPS = float64(len(lat)) / rep.Seconds
	rep.Latency = summarize(lat)
	rep.BenchCPU = (ru1 - ru0).Seconds()
	rep.BenchCPUPer1k = rep.BenchCPU * 1000 / float64(c.Events)
	if d, ok := after.delta(before, "process_cpu_seconds_total"); ok {
		per := d * 1000 / float64(c.Events)
		rep.DaemonCPU, rep.DaemonCPUPer1k = &d, &per
	}
	rep.GroupCommit = commits(before, after, c.Events)

	rep.Verify = g.verify(ctx)
	if !rep.Verify.OK {
		return rep, fmt.Errorf("%w: %s", ErrVerify, rep.Verify.Problem)
	}
	return rep, nil
}

// gen is a run in progress.
type gen struct {
	c     Config
	http  *http.Client
	base  string
	wires []*wire // one per worker, nil: events go through http

	mu   sync.Mutex
	seen map[uint64]struct{} // seqs answered
	dups int                 // seqs answered twice
}

// key is event i's key.
func (g *gen) key(i int) string { return g.c.KeyPrefix + strconv.Itoa(i%g.c.Keys) }

// body appends the request body for events [from, to).
func (g *gen) body(dst []byte, from, to int) []byte {
	if to-from > 1 {
		dst = append(dst, '[')
	}
	for i := from; i < to; i++ {
		if i > from {
			dst = append(dst, ',')
		}
		if g.c.Effects {
			dst = append(dst, `{"schema":"`+OrderSchema+`","value":{"order_id":"`...)
			dst = append(dst, g.c.KeyPrefix...)
			dst = strconv.AppendInt(dst, int64(i), 10)
			dst = append(dst, `","amount_cents":100,"customer":"bench"}}`...)
			continue
		}
		if g.c.Template != nil {
			dst = fill(dst, g.c.Template, g.key(i), i)
			continue
		}
		dst = append(dst, `{"schema":"`+CounterSchema+`","value":{"key":"`...)
		dst = append(dst, g.key(i)...)
		dst = append(dst, `","by":1}}`...)
	}
	if to-from > 1 {
		dst = append(dst, ']')
	}
	return dst
}

// load sends events [first, first+n) in requests of Batch from Concurrency
// workers, and returns each request's latency when measured.
func (g *gen) load(ctx context.Context, first, n int, measured bool) ([]time.Duration, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	reqs := (n + g.c.Batch - 1) / g.c.Batch
	var next atomic.Int64
	lat := make([]time.Duration, reqs)
	var wg sync.WaitGroup
	for w := 0; w < min(g.c.Concurrency, reqs); w++ {
		var wr *wire
		if g.wires != nil {
			wr = g.wires[w]
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			var buf []byte
			for ctx.Err() == nil {
				r := int(next.Add(1) - 1)
				if r >= reqs {
					return
				}
				from := first + r*g.c.Batch
				to := min(from+g.c.Batch, first+n)
				buf = g.body(buf[:0], from, to)
				t := time.Now()
				seqs, err := g.post(ctx, wr, buf, to-from)
				lat[r] = time.Since(t)
				if err != nil {
					cancel(fmt.Errorf("events %d-%d: %w", from, to-1, err))
					return
				}
				g.record(seqs)
			}
		}()
	}
	wg.Wait()
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	if !measured {
		return nil, nil
	}
	return lat, nil
}

func (g *gen) record(seqs []uint64) {
	g.mu.Lock()
	for _, s := range seqs {
		if _, ok := g.seen[s]; ok {
			g.dups++
		}
		g.seen[s] = struct{}{}
	}
	g.mu.Unlock()
}

// post sends one request of n events, on w when not nil, and returns their
// seqs.
func (g *gen) post(ctx context.Context, w *wire, body []byte, n int) ([]uint64, error) {
	var b []byte
	var status int
	var err error
	if w != nil {
		b, status, err = w.post(ctx, body)
	} else {
		b, status, err = g.do(ctx, "POST", "/v1/events", body)
	}
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("POST /v1/events: HTTP %d: %s", status, strings.TrimSpace(string(b)))
	}
	if n == 1 {
		var one struct {
			Seq *uint64 `json:"seq"`
		}
		if err := json.Unmarshal(b, &one); err != nil || one.Seq == nil {
			return nil, fmt.Errorf("POST /v1/events: answer without a seq: %s", b)
		}
		return []uint64{*one.Seq}, nil
	}
	var many struct {
		Seqs []uint64 `json:"seqs"`
	}
	if err := json.Unmarshal(b, &many); err != nil || len(many.Seqs) != n {
		return nil, fmt.Errorf("POST /v1/events: want %d seqs, got %s", n, b)
	}
	return many.Seqs, nil
}

// do is one request with the token; it returns the body and status.
func (g *gen) do(ctx context.Context, method, path string, body []byte) ([]byte, int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, g.base+path, rd)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", "Bearer "+g.c.Token)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := g.http.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, 0, fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	return b, resp.StatusCode, nil
}

// verify checks the world after the load (see the package doc).
func (g *gen) verify(ctx context.Context) Verify {
	total := g.c.Warmup + g.c.Events
	v := Verify{Seqs: len(g.seen), Mismatches: []Mismatch{}}
	fail := func(format string, args ...any) Verify {
		v.OK = false
		v.Problem = fmt.Sprintf(format, args...)
		return v
	}
	if g.dups > 0 || len(g.seen) != total {
		return fail("%d events sent, %d distinct seqs answered (%d answered twice)", total, len(g.seen), g.dups)
	}
	// With --effects the world stays busy: every order's expiry timer is
	// open for 15 minutes. Its quiescence is read, not waited for.
	settle := g.c.Settle
	if g.c.Effects {
		settle = 0
	}
	b, status, err := g.do(ctx, "GET", "/v1/quiescent?wait="+url.QueryEscape(settle.String()), nil)
	var q struct {
		Quiescent bool `json:"quiescent"`
	}
	if err != nil || status != http.StatusOK || json.Unmarshal(b, &q) != nil {
		return fail("GET /v1/quiescent: HTTP %d %v: %s", status, err, b)
	}
	v.Quiescent = q.Quiescent
	if !q.Quiescent && !g.c.Effects {
		return fail("the world is not quiescent %s after the load", g.c.Settle)
	}
	b, status, err = g.do(ctx, "GET", "/v1/failed?limit=100", nil)
	var f struct {
		Failed []struct {
			Workflow string          `json:"workflow"`
			Key      json.RawMessage `json:"key"`
		} `json:"failed"`
	}
	if err != nil || status != http.StatusOK || json.Unmarshal(b, &f) != nil {
		return fail("GET /v1/failed: HTTP %d %v: %s", status, err, b)
	}
	v.Failed = len(f.Failed)
	if len(f.Failed) > 0 {
		return fail("%d failed instance(s), the first %s key %s (aosd failed ls)", len(f.Failed), f.Failed[0].Workflow, f.Failed[0].Key)
	}
	if g.c.Effects {
		if err := g.verifyOrders(ctx, &v); err != nil {
			return fail("%v", err)
		}
		if len(v.Mismatches) > 0 {
			m := v.Mismatches[0]
			return fail("order %s: status %q, want \"paid\" (%d order(s) not paid)", m.Key, m.Status, len(v.Mismatches))
		}
	} else if g.c.Template == nil {
		if err := g.verifyCounts(ctx, &v); err != nil {
			return fail("%v", err)
		}
		if len(v.Mismatches) > 0 {
			m := v.Mismatches[0]
			if m.Got < 0 {
				return fail("key %s: no cell, want count %d (%d key(s) wrong)", m.Key, m.Want, len(v.Mismatches))
			}
			return fail("key %s: count %d, want %d (%d key(s) wrong)", m.Key, m.Got, m.Want, len(v.Mismatches))
		}
	}
	v.OK = true
	return v
}

// verifyCounts reads every counter cell and records the ones whose count
// is not what was sent, in key order.
func (g *gen) verifyCounts(ctx context.Context, v *Verify) error {
	total := g.c.Warmup + g.c.Events
	keys := min(g.c.Keys, total)
	want := func(k int) int64 {
		n := int64(total / g.c.Keys)
		if k < total%g.c.Keys {
			n++
		}
		return n
	}
	got := make([]int64, keys)
	errs := make([]error, keys)
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < min(g.c.Concurrency, 32, keys); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := int(next.Add(1) - 1)
				if k >= keys {
					return
				}
				got[k], errs[k] = g.count(ctx, g.key(k))
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	v.Keys = keys
	for k := range keys {
		if got[k] != want(k) {
			v.Mismatches = append(v.Mismatches, Mismatch{Key: g.key(k), Want: want(k), Got: got[k]})
		}
	}
	return nil
}

// count reads one counter cell's count; -1 when there is no cell.
func (g *gen) count(ctx context.Context, key string) (int64, error) {
	path := "/v1/cells/" + url.PathEscape(CounterWorkflow) + "/" + url.PathEscape(strconv.Quote(key))
	b, status, err := g.do(ctx, "GET", path, nil)
	if err != nil {
		return 0, err
	}
	if status == http.StatusNotFound {
		return -1, nil
	}
	var cell struct {
		State *struct {
			Count *int64 `json:"count"`
		} `json:"state"`
	}
	if status != http.StatusOK || json.Unmarshal(b, &cell) != nil || cell.State == nil || cell.State.Count == nil {
		return 0, fmt.Errorf("GET %s: HTTP %d: not a counter cell: %s", path, status, b)
	}
	return *cell.State.Count, nil
}

// summarize reads the percentiles from the sorted latencies (nearest rank).
func summarize(lat []time.Duration) Latency {
	if len(lat) == 0 {
		return Latency{}
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	rank := func(p float64) time.Duration {
		i := int(math.Ceil(p/100*float64(len(s)))) - 1
		return s[max(i, 0)]
	}
	var sum time.Duration
	for _, d := range s {
		sum += d
	}
	return Latency{P50: ms(rank(50)), P90: ms(rank(90)), P99: ms(rank(99)), Max: ms(s[len(s)-1]),
		Mean: ms(sum / time.Duration(len(s)))}
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
