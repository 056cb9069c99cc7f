package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// Backend is what a CLI command or an HTTP handler needs from a world: a
// Reader and a Writer. Local and Client implement it with the same
// results, so a command answers the same whether or not a daemon serves
// the world.
type Backend interface {
	Reader
	Writer
}

// Reader answers questions about a world and changes nothing in it: not
// its journal, its cells, its store or its files. (Replay and Shadow run
// scratch worlds beside it, which write only to memory.)
type Reader interface {
	Status(ctx context.Context) (*Status, error)
	// Limits are the world's limits (Writer.SetLimits changes them).
	Limits(ctx context.Context) (views.Limits, error)
	// Cells lists one page of a workflow's cells (kernel.World.CellPage).
	Cells(ctx context.Context, workflow string, q CellsQuery) (*CellPage, error)
	// Cell and Trace take the key as the user typed it (see ParseKey).
	Cell(ctx context.Context, workflow, key string) (*CellView, error)
	Trace(ctx context.Context, workflow, key string) ([]views.TraceEntry, error)
	TraceIntent(ctx context.Context, hash string) ([]views.TraceEntry, error)
	// Timeline is one page of a cell's trace with each step's state and
	// diff (views.Timelines).
	Timeline(ctx context.Context, workflow, key string, q views.TimelineQuery) (*views.TimelinePage, error)
	// Manifest is the manifest in force, with its source (manifestview.go).
	Manifest(ctx context.Context) (*ManifestView, error)
	// Failed pages through the failed instances (failed.go).
	Failed(ctx context.Context, q FailedQuery) (*FailedPage, error)
	// Modules lists the modules and those set aside.
	Modules(ctx context.Context) ([]ModuleView, error)
	// Manifests lists the live manifests, the current one last
	// (kernel.World.Manifests).
	Manifests(ctx context.Context) ([]LiveManifestView, error)
	// Journal calls fn with each matching record as one JSON object (the
	// journal's export, views.Describe).
	Journal(ctx context.Context, q JournalQuery, fn func(json.RawMessage) error) error
	// CheckJournal checks the journal's invariants (views.CheckJournal).
	CheckJournal(ctx context.Context) (*views.JournalCheck, error)
	// WaitQuiescent waits up to d for quiescence and reports whether it came.
	WaitQuiescent(ctx context.Context, d time.Duration) (bool, error)
	// Keys are the trusted executor keys.
	Keys(ctx context.Context) ([]KeyView, error)
	// Replay replays the journal into scratch worlds beside the world and
	// compares the state each reaches with the world's: from the latest
	// snapshot, and with verify also from genesis (kernel.VerifyWith).
	Replay(ctx context.Context, verify bool) (*ReplayReport, error)
	// Shadow runs a proposed manifest against a copy of the world
	// (kernel.World.Shadow) and reports what it did (shadow.go).
	Shadow(ctx context.Context, req ShadowRequest) (*ShadowOutput, error)
	// ReplayManifest checks a manifest's code against every cell's
	// history (kernel.ReplayManifest, `aosd replay --manifest`; upgrade.go).
	ReplayManifest(ctx context.Context, req ReplayManifestRequest) (*UpgradeOutput, error)
}

// Writer changes a world: each method journals, or changes what the
// world's store or directory holds.
type Writer interface {
	// Send journals events in order; an event under an idempotency key the
	// world remembers is answered with the original's seq as a duplicate.
	// An event parked for targets that cannot take it now says which
	// (kernel.Ingested.Parked; through a Client, each key is its JSON
	// converted back without a schema, which renders as the same JSON).
	Send(ctx context.Context, evs []Event) ([]kernel.Ingested, error)
	// Apply loads the manifest req names and applies it (with req.DryRun,
	// reports what would change and changes nothing). When the world is not
	// quiescent the result lists the blockers and the error has code
	// not_quiescent.
	Apply(ctx context.Context, req ApplyRequest) (*ApplyOutput, error)
	// SetLimits changes the non-zero fields of lim (journaled).
	SetLimits(ctx context.Context, lim kernel.Limits) (*LimitsResult, error)
	// Recover journals an operator's retry, reset or skip of a failed
	// instance.
	Recover(ctx context.Context, workflow string, req RecoverRequest) (*RecoverResult, error)
	// Cancel journals an operator's cancel of the intent in flight with
	// hash ("sha256:..."): the intent is settled, its executors' later
	// receipts, frames and claims refused, and its workflow delivered
	// sys/EffectCancelled@1 (or failed when it cannot take it).
	Cancel(ctx context.Context, hash string, req CancelRequest) (*CancelResult, error)
	// ResumeModule lets a module set aside run again (journaled).
	ResumeModule(ctx context.Context, module string) (*ResumeResult, error)
	// RetireManifest retires a drained live manifest that is not current
	// (journaled; kernel.World.Retire).
	RetireManifest(ctx context.Context, hash string) (*RetireResult, error)
	// AddKey trusts a PEM public key under executor name for effects
	// (exact names and "ns/*" namespaces; at least one, no sys/ effect);
	// RemoveKey stops trusting one. Both rewrite the world's keys file.
	AddKey(ctx context.Context, name, pubPEM string, effects []string) (KeyView, error)
	RemoveKey(ctx context.Context, id string) error
	// Snapshot takes a snapshot now (kernel.World.Snapshot); a snapshot
	// still being written refuses it with code not_idle.
	Snapshot(ctx context.Context) (*SnapshotResult, error)
	// GC collects the world's CAS, and with req.DropJournal applies the
	// journal's retention (gc.go).
	GC(ctx context.Context, req GCRequest) (*GCOutput, error)
	// Upgrade moves cells pinned to an older manifest onto the current
	// one after a replay check (kernel.World.Upgrade; upgrade.go).
	Upgrade(ctx context.Context, req UpgradeRequest) (*UpgradeOutput, error)
}

var (
	_ Backend = (*Local)(nil)
	_ Backend = (*Client)(nil)
)

// Event is one event offered at ingress, in JSON: an item of POST
// /v1/events, of a shadow request's events, of an events file (ParseEvents).
// It is kernel.Event's JSON form and carries the same fields; it exists
// because the kernel's event has none (the kernel imports no encoding/json,
// and its value may be canonical CBOR instead of JSON). An event becomes
// the kernel's in one place (kernelEvent), once the request is judged.
type Event struct {
	Schema string          `json:"schema"`
	Value  json.RawMessage `json:"value"`
	// IdempotencyKey makes a resend safe (kernel.Event.IdempotencyKey);
	// empty: none.
	IdempotencyKey string `json:"idempotency_key,omitempty"`
}

// kernelEvent is e as the kernel takes it.
func (e Event) kernelEvent() kernel.Event {
	return kernel.Event{Schema: e.Schema, JSON: e.Value, IdempotencyKey: e.IdempotencyKey}
}

// CellsQuery selects a page of a workflow's cells:
// GET /v1/cells/{workflow}?limit=N&after=CURSOR.
type CellsQuery struct {
	Limit int    // rows: 0 for kernel.DefaultCellPage (100), at most kernel.MaxCellPage (10,000)
	After string // the next of the page before ("" for the first page)
	// Status keeps only the rows with one of these statuses (running,
	// waiting, completed, failed, parked); empty: all (cellsfilter.go).
	Status []string
	// Key, with HasKey, looks up the one row of that key (as the user
	// typed it, see ParseKey): a page of that row or of none.
	Key    string
	HasKey bool
	// Pin keeps only the instances pinned to the live manifest of this
	// hash (sha256:<64 hex>), of any status unless Status narrows it; ""
	// does not filter (cellsfilter.go).
	Pin string
}

// JournalQuery selects journal records.
type JournalQuery struct {
	// From is the first seq. 0 or 1 is from the start: the first record
	// the journal holds, past whatever retention dropped. Above 1 and below
	// the first record held, the read is refused (CodeTruncated, 410): a
	// reader resuming at a seq must learn it missed records.
	From   uint64
	Limit  int      // at most this many records (0: no limit)
	Kinds  []string // only these kinds (empty: all)
	Follow bool     // keep streaming new records until ctx is done
	// Start, when set, is called once before any record (not when the read
	// is refused) with the lowest seq the journal holds as the read
	// begins: 1 unless retention dropped records (HeaderJournalFirst).
	Start func(first uint64)
}

// File is one file sent over the API: a manifest JSON file (Content), or a
// wasm artifact (Base64, its bytes base64-encoded; Name is the artifact path
// as the manifest names it, for messages). Artifacts are matched to modules by
// hash, so their names need not mirror any directory layout.
type File struct {
	Name    string          `json:"name"`
	Content json.RawMessage `json:"content,omitempty"`
	Base64  string          `json:"base64,omitempty"`
}

// ApplyRequest is the body of POST /v1/apply: exactly one of Path (a
// manifest file or directory on the daemon's machine) and Files (the
// manifest's JSON files, merged in the order given as Load merges a
// directory's files).
type ApplyRequest struct {
	Path   string `json:"path,omitempty"`
	Files  []File `json:"files,omitempty"`
	DryRun bool   `json:"dry_run,omitempty"`
	// Pin makes the manifest current whatever is in flight: what is in
	// flight stays pinned to its manifest (kernel.ApplyOptions.Pin).
	Pin bool `json:"pin,omitempty"`
	// Wait, a Go duration such as "30s", waits up to that long for
	// quiescence before applying.
	Wait string `json:"wait,omitempty"`
}

// ApplyOutput is `aosd apply --json` and the answer of POST /v1/apply.
type ApplyOutput struct {
	Applied      bool          `json:"applied"`
	Unchanged    bool          `json:"unchanged"`
	DryRun       bool          `json:"dry_run"`
	ManifestName string        `json:"manifest_name"`
	ManifestHash string        `json:"manifest_hash"`
	PreviousHash *string       `json:"previous_hash"`
	Seq          uint64        `json:"seq,omitempty"`
	Changes      Changes       `json:"changes"`
	BlockedBy    []BlockerView `json:"blocked_by"`
	// Pinned says the apply was an apply --pin; PinnedNow counts the
	// instances in flight it left pinned to the manifest it replaced.
	Pinned    bool `json:"pinned,omitempty"`
	PinnedNow int  `json:"pinned_now,omitempty"`
}

// Changes is what an apply changes.
type Changes struct {
	Added                []string                `json:"added"`
	Removed              []string                `json:"removed"`
	Changed              []string                `json:"changed"`
	SubscriptionsAdded   []manifest.Subscription `json:"subscriptions_added"`
	SubscriptionsRemoved []manifest.Subscription `json:"subscriptions_removed"`
}

// BlockerView is a kernel.Blocker with its key shown as JSON.
type BlockerView struct {
	Kind     string          `json:"kind"`
	Workflow string          `json:"workflow"`
	Key      json.RawMessage `json:"key"`
	Status   string          `json:"status,omitempty"`
	Intent   string          `json:"intent,omitempty"`
	Effect   string          `json:"effect,omitempty"`
	Reason   string          `json:"reason,omitempty"` // why an instance at rest stays pinned (kind "pinned")
}

// Local is a Backend over a world this process has open.
type Local struct {
	W *kernel.World
	// LoadKeys reads the world's trusted executor keys at the first request
	// that needs them (the keys routes), when the Local was given none
	// (NewLocal); nil: those requests are refused.
	LoadKeys func() (*Keys, error)
	// Config is the configuration W was opened with: Replay opens its
	// scratch worlds with it (the same builtins and wasm cache), and its
	// Progress, when set, follows their replays.
	Config kernel.Config
	// Lease, when set, reports this node's hold on the lease of a world on
	// PostgreSQL (Status.Lease).
	Lease     func() *LeaseView
	keys      *Keys
	timelines views.Timelines // the cells' timelines (timeline.go)
}

// NewLocal serves w with keys, the world's trusted executor keys sharing
// the keyring the kernel verifies receipts with, so keys added through it
// take effect at once (nil: none; the keys routes are refused). Set Config
// to the configuration w was opened with before Replay.
func NewLocal(w *kernel.World, keys *Keys) *Local {
	return &Local{W: w, keys: keys}
}

// Status implements Reader.
func (l *Local) Status(ctx context.Context) (*Status, error) {
	s, err := l.W.Status(ctx)
	if err != nil {
		if l.Lease != nil {
			if lv := l.Lease(); lv != nil && lv.SteppedDown != "" {
				return nil, Wrap(err, http.StatusServiceUnavailable, CodeUnavailable, "lease",
					"this node stepped down and serves the world no more: "+lv.SteppedDown)
			}
		}
		return nil, err
	}
	out := StatusOf(s)
	if l.Lease != nil {
		out.Lease = l.Lease()
	}
	snap, err := lastSnapshot(l.W.Journal(), s.JournalHeight)
	if err != nil {
		return nil, AsError(err, "status")
	}
	out.LastSnapshot, out.RecordsSinceSnapshot = snap, s.JournalHeight
	if snap != nil {
		out.RecordsSinceSnapshot = s.JournalHeight - snap.Checkpoint
	}
	return out, nil
}

// Cells implements Reader. A page size out of range or a cursor that is
// not one is invalid_input naming the parameter (limit, after).
func (l *Local) Cells(ctx context.Context, workflow string, q CellsQuery) (*CellPage, error) {
	if q.Limit < 0 || q.Limit > kernel.MaxCellPage {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "limit",
			"%d is not a page size: want 1..%d (0 or none: %d)", q.Limit, kernel.MaxCellPage, kernel.DefaultCellPage)
	}
	if _, err := kernel.ParseCellCursor(q.After); err != nil {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "after",
			"%q is not a cell cursor: want the next of an earlier page (64 hex digits)", q.After)
	}
	if err := checkStatuses(q.Status); err != nil {
		return nil, err
	}
	where := "workflow " + workflow
	if _, err := l.workflow(workflow); err != nil {
		return nil, AsError(err, where)
	}
	if q.Pin != "" {
		return l.pinnedCells(ctx, workflow, q)
	}
	if q.HasKey || len(q.Status) > 0 {
		return l.filteredCells(ctx, workflow, q)
	}
	p, err := l.W.CellPage(ctx, workflow, q.After, q.Limit)
	if err != nil {
		return nil, AsError(err, where)
	}
	return CellPageView(p), nil
}

// Cell implements Reader.
func (l *Local) Cell(ctx context.Context, workflow, key string) (*CellView, error) {
	k, err := l.key(workflow, key)
	if err != nil {
		return nil, err
	}
	v, err := l.W.Cell(ctx, workflow, k)
	if err != nil {
		return nil, AsError(err, fmt.Sprintf("workflow %s key %s", workflow, records.KeyJSON(k)))
	}
	return CellViewOf(v), nil
}

// Trace implements Reader.
func (l *Local) Trace(ctx context.Context, workflow, key string) ([]views.TraceEntry, error) {
	k, err := l.key(workflow, key)
	if err != nil {
		return nil, err
	}
	es, err := records.Trace(ctx, l.W.Journal(), workflow, k)
	if err != nil {
		return nil, AsError(err, fmt.Sprintf("trace %s key %s", workflow, records.KeyJSON(k)))
	}
	tr := views.TraceView(es)
	if err := views.StampTimes(ctx, l.W.Journal(), tr); err != nil {
		return nil, AsError(err, fmt.Sprintf("trace %s key %s", workflow, records.KeyJSON(k)))
	}
	return tr, nil
}

func (l *Local) workflow(name string) (*manifest.WorkflowDef, error) {
	m := l.W.Manifest()
	if m == nil {
		return nil, kernel.ErrNoManifest
	}
	def := m.Workflows[name]
	if def == nil {
		return nil, newError(http.StatusNotFound, CodeNotFound, "workflow "+name,
			"unknown workflow %q in manifest %s (workflows: %s)", name, m.Name, strings.Join(workflowNames(m), ", "))
	}
	return def, nil
}

func (l *Local) key(workflow, key string) ([]byte, error) {
	where := fmt.Sprintf("workflow %s key %s", workflow, key)
	def, err := l.workflow(workflow)
	if err != nil {
		return nil, AsError(err, where)
	}
	k, err := ParseKey(l.W.Manifest(), def, key)
	if err != nil {
		return nil, AsError(err, where)
	}
	return k, nil
}

// ParseKey turns a key as a user typed it into canonical CBOR validated
// against the workflow's key schema. The text is JSON if it parses as JSON,
// else a string; JSON that parses to a non-string and fails the key schema is
// tried once more as a string, so `aosd cells show WF 42` finds the cell "42"
// of a string-keyed workflow. An unkeyed workflow takes an empty key.
func ParseKey(m *manifest.Manifest, def *manifest.WorkflowDef, text string) ([]byte, error) {
	if !def.Keyed() {
		if text != "" && text != "null" {
			return nil, fmt.Errorf("%w: workflow %s is not keyed; give no key", kernel.ErrInvalid, def.Name)
		}
		return nil, nil
	}
	if text == "" {
		return nil, fmt.Errorf("%w: workflow %s is keyed by %s; give a key", kernel.ErrInvalid, def.Name, def.KeySchema)
	}
	if !utf8.ValidString(text) {
		// json.Marshal would make it U+FFFD and find another key's cell.
		return nil, fmt.Errorf("%w: key %q is not valid UTF-8", kernel.ErrInvalid, text)
	}
	asString, _ := json.Marshal(text)
	var v any
	if json.Unmarshal([]byte(text), &v) != nil {
		k, err := m.Registry.FromJSON(def.KeySchema, asString)
		if err != nil {
			return nil, fmt.Errorf("%w: key %s does not match %s: %v", kernel.ErrInvalid, asString, def.KeySchema, err)
		}
		return k, nil
	}
	k, err := m.Registry.FromJSON(def.KeySchema, []byte(text))
	if err == nil {
		return k, nil
	}
	if _, isString := v.(string); !isString {
		if k2, err2 := m.Registry.FromJSON(def.KeySchema, asString); err2 == nil {
			return k2, nil
		}
	}
	return nil, fmt.Errorf("%w: key %s does not match %s: %v", kernel.ErrInvalid, text, def.KeySchema, err)
}

func workflowNames(m *manifest.Manifest) []string {
	var out []string
	for n := range m.Workflows {
		out = append(out, n)
	}
	sortStrings(out)
	return out
}

// Journal implements Reader.
func (l *Local) Journal(ctx context.Context, q JournalQuery, fn func(json.RawMessage) error) error {
	for _, k := range q.Kinds {
		if !knownKind(k) {
			return newError(http.StatusBadRequest, CodeInvalidInput, "kind", "unknown record kind %q (kinds: %s)", k, strings.Join(kindNames, ", "))
		}
	}
	log := l.W.Journal()
	first := max(log.First(), 1)
	if q.From > 1 && q.From < first {
		return AsError(journal.TruncatedError(first, q.From), "from")
	}
	if q.Start != nil {
		q.Start(first)
	}
	next := max(q.From, 1)
	n := 0
	for started := false; ; started = true {
		read := func(r journal.Record) (bool, error) {
			next = r.Seq + 1
			if len(q.Kinds) > 0 && !containsString(q.Kinds, string(r.Kind)) {
				return true, nil
			}
			d, err := views.Describe(r)
			if err != nil {
				return false, fmt.Errorf("record %d: %w", r.Seq, err)
			}
			b, err := json.Marshal(d)
			if err != nil {
				return false, fmt.Errorf("record %d: %w", r.Seq, err)
			}
			if err := fn(b); err != nil {
				return false, err
			}
			n++
			return q.Limit <= 0 || n < q.Limit, nil
		}
		var err error
		if !started && q.From <= 1 {
			// From the start: whatever the journal holds, even if a
			// collection moved its first record since First above.
			var start uint64
			start, err = journal.ReadRetained(log, next, read)
			next = max(next, start)
		} else {
			// From a seq, or following on: records dropped before they
			// were read are a refusal, never skipped in silence.
			err = log.Read(next, read)
		}
		if err != nil {
			where := fmt.Sprintf("journal seq %d", next)
			if !started && errors.Is(err, journal.ErrTruncated) {
				where = "from"
			}
			return AsError(err, where)
		}
		if !q.Follow || (q.Limit > 0 && n >= q.Limit) {
			return nil
		}
		if _, err := l.W.Journal().Wait(ctx, next-1); err != nil {
			if ctx.Err() != nil {
				return nil // the follower went away or the daemon stops: a clean end
			}
			return err
		}
	}
}

// RecordKinds are the record kinds a journal read may filter by: all of
// them, in journal.Kinds order.
func RecordKinds() []string { return append([]string(nil), kindNames...) }

// kindNames are the record kinds a journal read may filter by: all of them.
var kindNames = func() []string {
	var out []string
	for _, k := range journal.Kinds() {
		out = append(out, string(k))
	}
	return out
}()

func knownKind(k string) bool { return containsString(kindNames, k) }

func containsString(xs []string, s string) bool {
	for _, x := range xs {
		if x == s {
			return true
		}
	}
	return false
}

// Send implements Writer. The kernel checks the events (once, for every
// caller); a refusal of one event is answered at its place in the request.
func (l *Local) Send(ctx context.Context, evs []Event) ([]kernel.Ingested, error) {
	if len(evs) == 0 {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "events", "no events given")
	}
	kevs := make([]kernel.Event, len(evs))
	for i, e := range evs {
		kevs[i] = e.kernelEvent()
	}
	res, err := l.W.Ingest(ctx, kevs...)
	if err != nil {
		return res, sendError(err, evs)
	}
	return res, nil
}

// sendError words a refused send. An event that lacks its schema or value
// is named at its place (event S, or events[i] S) in the API's own words;
// any other refusal carries the kernel's message.
func sendError(err error, evs []Event) *Error {
	var ie *kernel.InputError
	if errors.As(err, &ie) && ie.Missing && ie.Index < len(evs) {
		where := eventWhere(evs, ie.Index)
		if ie.Field == kernel.FieldSchema {
			return &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput, Where: where, Message: "event has no schema", err: err}
		}
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput, Where: where, Message: fmt.Sprintf("event %s has no value", evs[ie.Index].Schema), err: err}
	}
	where := "events"
	if len(evs) == 1 {
		where = "event " + evs[0].Schema
	}
	return AsError(err, where)
}

func eventWhere(evs []Event, i int) string {
	if len(evs) == 1 {
		return "event " + evs[0].Schema
	}
	return fmt.Sprintf("events[%d] %s", i, evs[i].Schema)
}

// WaitQuiescent implements Reader.
func (l *Local) WaitQuiescent(ctx context.Context, d time.Duration) (bool, error) {
	wctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	err := l.W.WaitQuiescent(wctx)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil:
		return false, nil
	default:
		return false, AsError(err, "wait")
	}
}

// Apply implements Writer.
func (l *Local) Apply(ctx context.Context, req ApplyRequest) (*ApplyOutput, error) {
	m, err := LoadManifest(req, l.W.CAS().Get)
	if err != nil {
		return nil, err
	}
	if req.Wait != "" {
		d, err := time.ParseDuration(req.Wait)
		if err != nil || d < 0 {
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, "wait", "wait %q is not a duration like 30s", req.Wait)
		}
		if _, err := l.WaitQuiescent(ctx, d); err != nil {
			return nil, err
		}
	}
	res, err := l.W.ApplyWith(ctx, m, kernel.ApplyOptions{DryRun: req.DryRun, Pin: req.Pin})
	var out *ApplyOutput
	if res != nil {
		out = applyOutput(m, res, req.DryRun)
	}
	if err != nil {
		where := "manifest " + m.Name
		if res != nil && !errors.Is(err, kernel.ErrNotQuiescent) && !errors.Is(err, kernel.ErrClosed) && !errors.Is(err, kernel.ErrBroken) {
			// The kernel refused to bind the manifest (e.g. a builtin this
			// binary lacks): the manifest is at fault, not the world.
			return out, &Error{Status: http.StatusBadRequest, Code: CodeInvalidManifest, Message: err.Error(), Where: where, err: err}
		}
		if errors.Is(err, kernel.ErrNotQuiescent) && out != nil {
			return out, &Error{Status: http.StatusConflict, Code: CodeNotQuiescent, Where: where, err: err,
				Message: fmt.Sprintf("world is not quiescent; apply refused (%d blockers; see blocked_by, or retry with --wait)", len(out.BlockedBy))}
		}
		return out, AsError(err, where)
	}
	return out, nil
}

func applyOutput(m *manifest.Manifest, res *kernel.ApplyResult, dry bool) *ApplyOutput {
	out := &ApplyOutput{
		Applied: res.Applied, Unchanged: res.Unchanged, DryRun: dry, ManifestName: m.Name,
		ManifestHash: res.ManifestHash.String(), Seq: res.Seq,
		Changes: Changes{
			Added: nonNil(res.Diff.Added), Removed: nonNil(res.Diff.Removed), Changed: nonNil(res.Diff.Changed),
			SubscriptionsAdded:   nonNilSubs(res.Diff.SubscriptionsAdded),
			SubscriptionsRemoved: nonNilSubs(res.Diff.SubscriptionsRemoved),
		},
		BlockedBy: []BlockerView{}, Pinned: res.Pinned, PinnedNow: res.PinnedNow,
	}
	if res.Previous != nil {
		s := res.Previous.String()
		out.PreviousHash = &s
	}
	for _, b := range res.BlockedBy {
		out.BlockedBy = append(out.BlockedBy, BlockerView{Kind: b.Kind, Workflow: b.Workflow, Key: records.KeyJSON(b.Key),
			Status: b.Status, Intent: b.Intent, Effect: b.Effect, Reason: b.Reason})
	}
	return out
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func nonNilSubs(s []manifest.Subscription) []manifest.Subscription {
	if s == nil {
		return []manifest.Subscription{}
	}
	return s
}

// LoadManifest loads the manifest an ApplyRequest names. Files are written
// to a private temporary directory and loaded as a manifest directory would
// be, so they merge and validate exactly as `aosd apply DIR` does; problems
// name the files as the request named them. Wasm artifacts come from the
// request's base64 files, else from stored (the world's CAS: a world that
// holds an artifact needs it uploaded only once), else from disk for Path.
//
// A manifest sent as files is confined to what was sent: its wasm artifacts
// come from the upload (matched by hash, or by name to report a hash
// mismatch) or the world, never from the server's disk, whatever their
// paths say ("../../etc/passwd", absolute paths and symlinks alike), so a
// refusal never reveals anything of a file the client did not send.
func LoadManifest(req ApplyRequest, stored func(schemas.Hash) ([]byte, error)) (*manifest.Manifest, error) {
	up := upload{byHash: map[schemas.Hash][]byte{}, byName: map[string][]byte{}}
	var jsonFiles []File
	var jsonIdx []int
	for i, f := range req.Files {
		if f.Base64 == "" {
			jsonFiles, jsonIdx = append(jsonFiles, f), append(jsonIdx, i)
			continue
		}
		if len(f.Content) > 0 {
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, fmt.Sprintf("files[%d]", i), "file %q has both content and base64; give one", f.Name)
		}
		b, err := base64.StdEncoding.DecodeString(f.Base64)
		if err != nil {
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, fmt.Sprintf("files[%d].base64", i), "artifact %q is not standard base64: %v", f.Name, err)
		}
		up.byHash[schemas.HashBytes(b)] = b
		up.byName[path.Clean(f.Name)] = b
	}
	up.stored = stored
	artifacts := func(h schemas.Hash) ([]byte, error) {
		if b, ok := up.byHash[h]; ok {
			return b, nil
		}
		if stored != nil {
			if b, err := stored(h); err == nil {
				return b, nil
			}
		}
		return nil, manifest.ErrNoArtifact
	}
	switch {
	case req.Path != "" && len(jsonFiles) > 0:
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "apply", "give path or files, not both")
	case req.Path != "":
		m, err := manifest.LoadWith(req.Path, artifacts)
		if err != nil {
			return nil, AsError(err, req.Path)
		}
		return m, nil
	case len(jsonFiles) == 0:
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "apply", "give the manifest as path or files (at least one .json file)")
	}
	dir, err := os.MkdirTemp("", "aos-apply-")
	if err != nil {
		return nil, AsError(err, "apply")
	}
	defer os.RemoveAll(dir)
	names := map[string]string{}
	for k, f := range jsonFiles {
		i := jsonIdx[k]
		base := filepath.Base(f.Name)
		if !strings.HasSuffix(base, ".json") {
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, fmt.Sprintf("files[%d]", i), "file name %q must end in .json (an artifact goes in \"base64\")", f.Name)
		}
		// Prefix with the index so the given order is the load order and
		// equal base names from different directories do not collide.
		local := fmt.Sprintf("%04d-%s", i, base)
		names[filepath.Join(dir, local)] = f.Name
		if err := os.WriteFile(filepath.Join(dir, local), f.Content, 0o600); err != nil {
			return nil, AsError(err, "apply")
		}
	}
	m, err := manifest.LoadArtifacts(dir, "DIR", up.artifact)
	if err != nil {
		var ps manifest.Problems
		if errors.As(err, &ps) {
			for i := range ps {
				if n, ok := names[ps[i].File]; ok {
					ps[i].File = n
				} else if ps[i].File == dir {
					ps[i].File = "<request>"
				}
			}
			return nil, AsError(ps, "apply")
		}
		return nil, AsError(err, "apply")
	}
	return m, nil
}

// upload is what a POST /v1/apply sent as artifacts, and the world's
// stored artifacts: the only places a manifest sent as files may take its
// wasm modules from.
type upload struct {
	byHash map[schemas.Hash][]byte
	byName map[string][]byte // by the name sent, path.Clean'ed
	stored func(schemas.Hash) ([]byte, error)
}

// artifact is the manifest.ArtifactFunc of a manifest sent as files: the
// artifact of the hash the def declares, uploaded or stored; else one
// uploaded under the def's artifact name, whose other hash the loader
// reports as a mismatch; else a refusal that says what to send. Nothing
// is read from disk.
func (u upload) artifact(name, _ string, want schemas.Hash) ([]byte, string) {
	if b, ok := u.byHash[want]; ok {
		return b, ""
	}
	if u.stored != nil {
		if b, err := u.stored(want); err == nil {
			return b, ""
		}
	}
	if b, ok := u.byName[path.Clean(name)]; ok {
		return b, ""
	}
	if path.IsAbs(name) || filepath.IsAbs(name) || !filepath.IsLocal(filepath.FromSlash(name)) {
		return nil, fmt.Sprintf("wasm artifact %q was not uploaded, and the world does not hold %s; a path outside the upload is never read on the server: send the module in \"files\" as {\"name\": %q, \"base64\": ...}",
			name, want, name)
	}
	return nil, fmt.Sprintf("wasm artifact %s was not uploaded, and the world does not hold %s: send it in \"files\" as {\"name\": %q, \"base64\": ...} (aosd apply DIR sends the artifacts its manifest names)",
		name, want, name)
}

// ReadManifestFiles reads path (a manifest file or directory) as the files
// an ApplyRequest carries, in the order manifest.Load reads them.
func ReadManifestFiles(path string) ([]File, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	paths := []string{path}
	if info.IsDir() {
		paths = nil
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".json") {
				paths = append(paths, filepath.Join(path, e.Name()))
			}
		}
	}
	var out []File
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		if !json.Valid(b) {
			// Send it anyway as a JSON string would change its meaning;
			// the caller validated locally first, so this is rare.
			return nil, fmt.Errorf("%s: not valid JSON", p)
		}
		out = append(out, File{Name: filepath.Base(p), Content: b})
	}
	m, err := manifest.Load(path)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, n := range sortedNames(m.Modules) {
		rt := &m.Modules[n].Runtime
		if rt.Kind != "wasm" || seen[rt.ArtifactHash] {
			continue
		}
		seen[rt.ArtifactHash] = true
		out = append(out, File{Name: rt.Artifact, Base64: base64.StdEncoding.EncodeToString(rt.Bytes)})
	}
	return out, nil
}

func sortedNames[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
