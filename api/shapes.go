package api

import (
	"encoding/json"
	"time"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// The JSON shapes of the kernel's query answers. The kernel answers with
// plain structs holding keys and states as canonical CBOR; the daemon
// renders them here, off the kernel's loop, for the API and the CLI.

// CellPage is one page of a workflow's cells (GET /v1/cells/{workflow},
// `aosd cells ls`).
type CellPage struct {
	Cells []CellInfo `json:"cells"`
	// Next is the cursor to pass as after for the following page; absent on
	// the last page.
	Next string `json:"next,omitempty"`
}

// CellInfo is one row of a cell listing (kernel.CellInfo).
type CellInfo struct {
	Key        json.RawMessage `json:"key"`
	StateHash  schemas.Hash    `json:"state_hash"`
	Size       uint64          `json:"size"`
	Status     string          `json:"status"`
	LastActive uint64          `json:"last_active_ns"`
	Reason     string          `json:"reason,omitempty"`
	// Pin is the older live manifest the instance steps under (absent on
	// the current one); PinReason why one at rest stays there.
	Pin       string `json:"pin,omitempty"`
	PinReason string `json:"pin_reason,omitempty"`
}

// CellView is one cell (GET /v1/cells/{workflow}/{key}, `aosd cells show`):
// kernel.CellView with its key and state as JSON (state null when there is
// no cell, or when the state has no JSON form).
type CellView struct {
	Workflow  string          `json:"workflow"`
	Key       json.RawMessage `json:"key"`
	Status    string          `json:"status"`
	Reason    string          `json:"reason,omitempty"`
	State     json.RawMessage `json:"state"`
	StateHash *schemas.Hash   `json:"state_hash"`
	Size      uint64          `json:"size"`
	Inflight  []string        `json:"inflight"`
	// Parked is how many events are parked for the instance (it is
	// failed, or its module is set aside); AsideModule names the module
	// set aside that holds its workflow (absent when none).
	Parked      uint64 `json:"parked"`
	AsideModule string `json:"aside_module,omitempty"`
	// Pin is the older live manifest the instance steps under (absent on
	// the current one); PinReason why one at rest stays there.
	Pin       string `json:"pin,omitempty"`
	PinReason string `json:"pin_reason,omitempty"`
}

// FailedInfo is one failed instance (GET /v1/failed, `aosd failed ls`):
// kernel.FailedInfo with its key as JSON.
type FailedInfo struct {
	Workflow string          `json:"workflow"`
	Key      json.RawMessage `json:"key"`
	Input    uint64          `json:"input"`     // seq of the input whose step failed
	FaultSeq uint64          `json:"fault_seq"` // seq of the fault record; a recover must name it
	Reason   string          `json:"reason"`
	Class    string          `json:"class"`   // "business", "environmental" or "budget"
	Skipped  uint64          `json:"skipped"` // events skipped since it failed (never delivered; worlds from before parking)
	// Parked is how many events wait for it, delivered after a recover's
	// action unless the recover drops them; ParkedBlocked says why the
	// current manifest cannot take them (a recover must drop them then).
	Parked        uint64 `json:"parked"`
	ParkedBlocked string `json:"parked_blocked,omitempty"`
	InputSchema   string `json:"input_schema,omitempty"`
	Retryable     bool   `json:"retryable"`
	// RetryBlocked says why retry cannot deliver the failed input again.
	RetryBlocked string `json:"retry_blocked,omitempty"`
}

// CellPageView renders a page of the kernel's cell listing.
func CellPageView(p *kernel.CellPage) *CellPage {
	return &CellPage{Cells: CellInfoViews(p.Cells), Next: p.Next}
}

// CellInfoViews renders cell rows, never nil.
func CellInfoViews(rows []kernel.CellInfo) []CellInfo {
	out := make([]CellInfo, len(rows))
	for i, r := range rows {
		out[i] = CellInfo{Key: records.KeyJSON(r.Key), StateHash: r.StateHash, Size: r.Size, Status: r.Status,
			LastActive: r.LastActive, Reason: r.Reason, Pin: r.Pin, PinReason: r.PinReason}
	}
	return out
}

// CellViewOf renders one cell.
func CellViewOf(v *kernel.CellView) *CellView {
	out := &CellView{Workflow: v.Workflow, Key: records.KeyJSON(v.Key), Status: v.Status, Reason: v.Reason,
		State: json.RawMessage("null"), StateHash: v.StateHash, Size: v.Size, Inflight: v.Inflight,
		Parked: v.Parked, AsideModule: v.AsideModule, Pin: v.Pin, PinReason: v.PinReason}
	if v.State != nil {
		if js, err := schemas.ToJSON(v.State); err == nil {
			out.State = js
		}
	}
	return out
}

// FailedInfoOf renders one failed instance.
func FailedInfoOf(fi *kernel.FailedInfo) FailedInfo {
	return FailedInfo{Workflow: fi.Workflow, Key: records.KeyJSON(fi.Key), Input: fi.Input, FaultSeq: fi.FaultSeq,
		Reason: fi.Reason, Class: fi.Class, Skipped: fi.Skipped, Parked: fi.Parked, ParkedBlocked: fi.ParkedBlocked,
		InputSchema: fi.InputSchema, Retryable: fi.Retryable, RetryBlocked: fi.RetryBlocked}
}

// Status is the world at a glance (GET /v1/status, `aosd status --json`):
// kernel.Status as JSON. Cells is the kernel's map as is (null when it is
// nil).
type Status struct {
	// World is the world's identity: "world:" and 32 hex digits, made when
	// the world was created (kernel.World.Identity). Every intent hash
	// binds it, and every receipt and frame must name it.
	World         string        `json:"world"`
	ManifestHash  *schemas.Hash `json:"manifest_hash"`
	ManifestName  string        `json:"manifest_name,omitempty"`
	JournalHeight uint64        `json:"journal_height"`
	// JournalFirst is the lowest seq the journal holds: 1, unless
	// retention (aosd gc --drop-journal) dropped the records before it.
	JournalFirst  uint64         `json:"journal_first"`
	Quiescent     bool           `json:"quiescent"`
	Instances     InstanceCounts `json:"instances"`
	Inflight      int            `json:"inflight"`
	QueuedEffects int            `json:"queued_effects"`
	Cells         map[string]int `json:"cells"`
	Limits        views.Limits   `json:"limits"`
	// Parked is how many events are parked (for failed instances, and for
	// those whose module is set aside).
	Parked uint64 `json:"parked"`
	// Aside lists the modules set aside, with the inputs that wait for
	// each ([] when none).
	Aside []ModuleView `json:"aside"`
	// Pinned lists the older live manifests an apply --pin kept, with the
	// instances pinned to each (absent when only the current manifest is
	// live; GET /v1/manifests has the details).
	Pinned []PinnedManifest `json:"pinned,omitempty"`
	// LastSnapshot is the latest snapshot record at or below the height
	// (null before the first snapshot).
	LastSnapshot *SnapshotRef `json:"last_snapshot"`
	// RecordsSinceSnapshot is how many records follow the latest snapshot's
	// checkpoint: what opening the world replays (the whole journal before
	// the first snapshot). The snapshot policy keeps it below twice
	// AOS_SNAPSHOT_EVERY plus one loop turn's records, a snapshot being
	// written included (kernel.Config.SnapshotMaxTail; docs/snapshots.md).
	RecordsSinceSnapshot uint64 `json:"records_since_snapshot"`
	// Cluster is the answering node's view of who owns the world, on a
	// world several nodes serve (aosd serve --node); absent otherwise.
	Cluster *ClusterStatus `json:"cluster,omitempty"`
	// Journaled counts the records of each kind (every kind present) the
	// world made durable since this process opened it, replay not
	// counted: the difference of two readings over their interval is a
	// rate (events, steps, receipts per second).
	Journaled map[journal.Kind]uint64 `json:"journaled"`
	// Lease is this node's hold on a world on PostgreSQL (absent for a
	// Badger world): whether it owns the world, with which epoch, or why
	// it stepped down.
	Lease *LeaseView `json:"lease,omitempty"`
}

// LeaseView is a node's hold on the lease of a world on PostgreSQL, as
// GET /v1/status shows it.
type LeaseView struct {
	// Node is this node's identity (its world directory's postgres.json).
	Node string `json:"node"`
	// Owner says this node owns the world and writes it; false for a node
	// that opened it to read, and for one that stepped down.
	Owner bool `json:"owner"`
	// Epoch is the lease epoch its writes are fenced by (0: none).
	Epoch uint64 `json:"epoch"`
	// SteppedDown, when set, says why this node stopped writing: another
	// node took the lease.
	SteppedDown string `json:"stepped_down,omitempty"`
}

// SnapshotRef names a journaled snapshot.
type SnapshotRef struct {
	Seq        uint64       `json:"seq"`        // the snapshot record
	Checkpoint uint64       `json:"checkpoint"` // its checkpoint: the snapshot is the state after it
	Object     schemas.Hash `json:"object"`     // the snapshot object in the CAS
}

// SnapshotResult says what a snapshot did (POST /v1/snapshot, `aosd
// snapshot --json`): kernel.SnapshotResult as JSON, durations in
// milliseconds (to the microsecond).
type SnapshotResult struct {
	Checkpoint uint64       `json:"checkpoint"`
	Seq        uint64       `json:"seq"`
	Object     schemas.Hash `json:"object"`
	Bytes      int          `json:"bytes"`
	Dirty      int          `json:"dirty"` // dirty cells it wrote
	Cells      uint64       `json:"cells"` // cells in all workflows
	// PauseMs is how long the world's loop paused (to journal the
	// checkpoint and copy its tables, then to install the written cells);
	// DurationMs runs from the checkpoint until the snapshot record was
	// durable.
	PauseMs    float64 `json:"pause_ms"`
	DurationMs float64 `json:"duration_ms"`
}

// ReplayReport is the answer of POST /v1/replay and `aosd replay --json`:
// kernel.VerifyReport as JSON. OK is true when every run reached the live
// state.
type ReplayReport struct {
	Height    uint64       `json:"height"`     // the live height the runs replayed up to
	LiveState schemas.Hash `json:"live_state"` // hash of the live state's snapshot encoding
	OK        bool         `json:"ok"`
	Runs      []ReplayRun  `json:"runs"`
}

// ReplayRun is one scratch replay (kernel.VerifyRun).
type ReplayRun struct {
	// From is "genesis" (the whole journal, recomputing every journaled
	// snapshot) or "snapshot" (the latest snapshot and the tail after it).
	From string `json:"from"`
	// Snapshot is the snapshot the run was loaded from; null when it
	// replayed from genesis (a "snapshot" run on a world without one).
	Snapshot *ReplayStart `json:"snapshot"`
	Replayed uint64       `json:"replayed"` // records replayed
	// Skipped lists newer snapshots the run could not use, and why.
	Skipped []string `json:"skipped"`
	// Verified is how many journaled snapshots the run recomputed byte for
	// byte (genesis runs).
	Verified int `json:"verified"`
	// State is the hash of the state the run reached; null when it did
	// not reach one (see error).
	State *schemas.Hash `json:"state"`
	OK    bool          `json:"ok"`
	// Diff names the first difference from the live state; Error says why
	// the replay stopped (a divergence names the record, workflow, key and
	// both hashes). Both absent when the run is OK.
	Diff  string `json:"diff,omitempty"`
	Error string `json:"error,omitempty"`
}

// ReplayStart is where a run started: a snapshot record and its checkpoint.
type ReplayStart struct {
	Seq        uint64 `json:"seq"`
	Checkpoint uint64 `json:"checkpoint"`
}

// InstanceCounts counts instances by status (kernel.InstanceCounts).
type InstanceCounts struct {
	Running   int `json:"running"`
	Waiting   int `json:"waiting"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
	Parked    int `json:"parked"` // not failed, with events parked behind a module set aside
}

// LimitsResult says what a limits change did (POST /v1/limits, `aosd
// limits set --json`): kernel.LimitsResult as JSON.
type LimitsResult struct {
	Limits  views.Limits `json:"limits"`
	Changed bool         `json:"changed"`
	Seq     uint64       `json:"seq,omitempty"` // the config record, when changed
}

// RecoverResult says what a recover did (POST
// /v1/failed/{workflow}/recover, `aosd failed retry|reset|skip --json`):
// kernel.RecoverResult as JSON.
type RecoverResult struct {
	Seq    uint64 `json:"seq"`    // the recover record
	Status string `json:"status"` // the instance's status afterwards (what it delivered has run to idle)
	// FaultSeq and Reason: the retried input, or a parked event delivered
	// after it, failed again, with this fault.
	FaultSeq uint64 `json:"fault_seq,omitempty"`
	Reason   string `json:"reason,omitempty"`
	// Delivered is how many parked events it delivered again; Dropped how
	// many it dropped (drop_parked).
	Delivered uint64 `json:"delivered"`
	Dropped   uint64 `json:"dropped"`
}

// ModuleView is one module (GET /v1/modules, `aosd modules`, and the
// modules set aside in GET /v1/status): kernel.ModuleInfo as JSON.
type ModuleView struct {
	Name       string       `json:"name"`
	Kind       string       `json:"kind,omitempty"` // wasm or builtin; absent for a module the manifest no longer has
	Hash       schemas.Hash `json:"hash"`
	InManifest bool         `json:"in_manifest"`
	// Status is "running", or "aside" when it is set aside (since the
	// module record at aside_seq, for reason).
	Status    string   `json:"status"`
	AsideSeq  uint64   `json:"aside_seq,omitempty"`
	Reason    string   `json:"reason,omitempty"`
	Workflows []string `json:"workflows"`
	// Waiting is how many parked inputs wait for a resume, in Instances
	// instances (those it holds that are not failed).
	Waiting   uint64 `json:"waiting"`
	Instances int    `json:"instances"`
	// TimeoutsInARow is how many of its latest steps the wall clock
	// stopped (the running daemon's count; the module is set aside when
	// it reaches the daemon's threshold).
	TimeoutsInARow int `json:"timeouts_in_a_row"`
}

// ModuleViewOf renders one module.
func ModuleViewOf(m *kernel.ModuleInfo) ModuleView {
	v := ModuleView{Name: m.Name, Kind: m.Kind, Hash: m.Hash, InManifest: m.InManifest, Status: "running",
		AsideSeq: m.AsideSeq, Reason: m.Reason, Workflows: m.Workflows, Waiting: m.Waiting, Instances: m.Instances,
		TimeoutsInARow: m.TimeoutsInARow}
	if m.Aside {
		v.Status = "aside"
	}
	if v.Workflows == nil {
		v.Workflows = []string{}
	}
	return v
}

// ModuleViews renders modules, never nil.
func ModuleViews(ms []kernel.ModuleInfo) []ModuleView {
	out := make([]ModuleView, len(ms))
	for i := range ms {
		out[i] = ModuleViewOf(&ms[i])
	}
	return out
}

// ResumeResult says what a resume did (POST /v1/modules/{module}/resume,
// `aosd modules resume --json`): kernel.ResumeResult as JSON.
type ResumeResult struct {
	Seq       uint64 `json:"seq"`       // the module record
	Delivered uint64 `json:"delivered"` // parked events delivered again
	Instances int    `json:"instances"` // instances they were delivered to
}

// ReceiptResult says what became of a receipt (POST /v1/receipts):
// kernel.ReceiptResult as JSON.
type ReceiptResult struct {
	Seq      uint64 `json:"seq"`
	Dropped  bool   `json:"dropped,omitempty"`
	Rejected string `json:"rejected,omitempty"`
	Reason   string `json:"reason,omitempty"`
}

// PinnedManifest is an older live manifest in Status.
type PinnedManifest struct {
	Hash      string `json:"hash"`
	Name      string `json:"name"`
	Instances int    `json:"instances"`
}

// StatusOf renders the kernel's status.
func StatusOf(s *kernel.Status) *Status {
	var pinned []PinnedManifest
	for _, p := range s.Pinned {
		pinned = append(pinned, PinnedManifest{Hash: p.Hash.String(), Name: p.Name, Instances: p.Instances})
	}
	return &Status{Pinned: pinned, World: s.World, ManifestHash: s.ManifestHash, ManifestName: s.ManifestName, JournalHeight: s.JournalHeight,
		JournalFirst: s.JournalFirst, Quiescent: s.Quiescent, Instances: InstanceCounts(s.Instances), Inflight: s.Inflight,
		QueuedEffects: s.QueuedEffects, Cells: s.Cells, Limits: views.Limits(s.Limits), Journaled: s.Journaled,
		Parked: s.Parked, Aside: ModuleViews(s.Aside)}
}

// SnapshotResultOf renders what a snapshot did.
func SnapshotResultOf(r kernel.SnapshotResult) *SnapshotResult {
	return &SnapshotResult{Checkpoint: r.Checkpoint, Seq: r.Seq, Object: r.Object, Bytes: r.Bytes, Dirty: r.Dirty,
		Cells: r.Cells, PauseMs: millis(r.Pause), DurationMs: millis(r.Duration)}
}

// millis is d in milliseconds, to the microsecond.
func millis(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// ReplayReportOf renders a verification.
func ReplayReportOf(r kernel.VerifyReport) *ReplayReport {
	out := &ReplayReport{Height: r.Height, LiveState: r.Live, OK: r.OK, Runs: make([]ReplayRun, len(r.Runs))}
	for i, run := range r.Runs {
		v := ReplayRun{From: run.From, Replayed: run.Opened.Replayed, Skipped: nonNil(run.Opened.Skipped),
			Verified: run.Verified, OK: run.Diff == "" && run.Err == "", Diff: run.Diff, Error: run.Err}
		if run.Opened.Snapshot != 0 {
			v.Snapshot = &ReplayStart{Seq: run.Opened.Snapshot, Checkpoint: run.Opened.Checkpoint}
		}
		if !run.State.IsZero() {
			h := run.State
			v.State = &h
		}
		out.Runs[i] = v
	}
	return out
}

// LimitsResultOf renders what SetLimits did.
func LimitsResultOf(r *kernel.LimitsResult) *LimitsResult {
	return &LimitsResult{Limits: views.Limits(r.Limits), Changed: r.Changed, Seq: r.Seq}
}
