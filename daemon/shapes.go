package daemon

import (
	"encoding/json"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/schemas"
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
}

// FailedInfo is one failed instance (GET /v1/failed, `aosd failed ls`):
// kernel.FailedInfo with its key as JSON.
type FailedInfo struct {
	Workflow    string          `json:"workflow"`
	Key         json.RawMessage `json:"key"`
	Input       uint64          `json:"input"`     // seq of the input whose step failed
	FaultSeq    uint64          `json:"fault_seq"` // seq of the fault record; a recover must name it
	Reason      string          `json:"reason"`
	Class       string          `json:"class"`   // "business", "environmental" or "budget"
	Skipped     uint64          `json:"skipped"` // events addressed to it since it failed (never delivered)
	InputSchema string          `json:"input_schema,omitempty"`
	Retryable   bool            `json:"retryable"`
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
		out[i] = CellInfo{Key: KeyJSON(r.Key), StateHash: r.StateHash, Size: r.Size, Status: r.Status,
			LastActive: r.LastActive, Reason: r.Reason}
	}
	return out
}

// CellViewOf renders one cell.
func CellViewOf(v *kernel.CellView) *CellView {
	out := &CellView{Workflow: v.Workflow, Key: KeyJSON(v.Key), Status: v.Status, Reason: v.Reason,
		State: json.RawMessage("null"), StateHash: v.StateHash, Size: v.Size, Inflight: v.Inflight}
	if v.State != nil {
		if js, err := schemas.ToJSON(v.State); err == nil {
			out.State = js
		}
	}
	return out
}

// FailedInfoOf renders one failed instance.
func FailedInfoOf(fi *kernel.FailedInfo) FailedInfo {
	return FailedInfo{Workflow: fi.Workflow, Key: KeyJSON(fi.Key), Input: fi.Input, FaultSeq: fi.FaultSeq,
		Reason: fi.Reason, Class: fi.Class, Skipped: fi.Skipped, InputSchema: fi.InputSchema,
		Retryable: fi.Retryable, RetryBlocked: fi.RetryBlocked}
}
