package api

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// UpgradeRequest is the body of POST /v1/upgrade (`aosd upgrade`): the
// cells of one workflow to move to the current manifest (docs/upgrades.md).
// Keys are JSON, read like the key of GET /v1/cells/{workflow}/{key}.
type UpgradeRequest struct {
	Workflow string            `json:"workflow"`
	Keys     []json.RawMessage `json:"keys,omitempty"`
	All      bool              `json:"all,omitempty"`
	Status   string            `json:"status,omitempty"`
	DryRun   bool              `json:"dry_run,omitempty"`
}

// UpgradeOutput is `aosd upgrade --json`, `aosd replay --manifest --json`
// and the answer of POST /v1/upgrade and POST /v1/replay/manifest
// (kernel.UpgradeReport).
type UpgradeOutput struct {
	Workflow     string        `json:"workflow,omitempty"` // "" for the offline check of every workflow
	ManifestName string        `json:"manifest_name"`      // the manifest the cells move (would move) to
	ManifestHash schemas.Hash  `json:"manifest_hash"`
	DryRun       bool          `json:"dry_run"`
	Height       uint64        `json:"height"`   // the journal height the check replayed to
	Start        uint64        `json:"start"`    // it replayed from after this seq (0: genesis)
	Replayed     int           `json:"replayed"` // records replayed
	Steps        int           `json:"steps"`    // steps the new code was checked on
	Counts       UpgradeCounts `json:"counts"`
	Cells        []UpgradeCell `json:"cells"`
}

// UpgradeCounts counts the cells by outcome.
type UpgradeCounts struct {
	Moved     int `json:"moved"`
	WouldMove int `json:"would_move"`
	Diverged  int `json:"diverged"`
	Other     int `json:"other"` // not pinned, not found, refused, changed, skipped
}

// UpgradeCell is one cell's outcome (kernel.UpgradeCell).
type UpgradeCell struct {
	Workflow   string             `json:"workflow"`
	Key        json.RawMessage    `json:"key"`
	Outcome    string             `json:"outcome"`
	Status     string             `json:"status,omitempty"`
	From       *schemas.Hash      `json:"from"` // the manifest it is pinned to (null: none)
	Since      string             `json:"since,omitempty"`
	Inputs     []uint64           `json:"inputs"`
	StateHash  *schemas.Hash      `json:"state_hash,omitempty"`
	Migrated   *schemas.Hash      `json:"migrated,omitempty"` // the state the workflow's migration took (absent: kept as it was)
	Seq        uint64             `json:"seq,omitempty"`      // its move record
	Divergence *UpgradeDivergence `json:"divergence,omitempty"`
	Reason     string             `json:"reason,omitempty"`
}

// UpgradeDivergence is the first record a cell's check did not reproduce
// (kernel.Divergence).
type UpgradeDivergence struct {
	Seq     uint64        `json:"seq"`
	Kind    string        `json:"kind"`
	Input   uint64        `json:"input"`
	What    string        `json:"what"`
	Want    *schemas.Hash `json:"want,omitempty"`
	Got     *schemas.Hash `json:"got,omitempty"`
	Field   string        `json:"field,omitempty"`
	Index   int           `json:"index"`
	Message string        `json:"message"`
}

// ReplayManifestRequest is the body of POST /v1/replay/manifest: the
// manifest to check, exactly as POST /v1/apply takes it.
type ReplayManifestRequest struct {
	Path  string `json:"path,omitempty"`
	Files []File `json:"files,omitempty"`
}

// UpgradeOutputOf renders a kernel report.
func UpgradeOutputOf(r *kernel.UpgradeReport) *UpgradeOutput {
	o := &UpgradeOutput{Workflow: r.Workflow, ManifestName: r.ToName, ManifestHash: r.To, DryRun: r.DryRun, Height: r.Height,
		Start: r.Start, Replayed: r.Replayed, Steps: r.Steps, Cells: make([]UpgradeCell, 0, len(r.Cells))}
	for _, c := range r.Cells {
		v := UpgradeCell{Workflow: c.Workflow, Key: records.KeyJSON(c.Key), Outcome: c.Outcome, Status: c.Status, Since: c.Since,
			Inputs: c.Inputs, StateHash: c.StateHash, Migrated: c.Migrated, Seq: c.Seq, Reason: c.Reason}
		if v.Inputs == nil {
			v.Inputs = []uint64{}
		}
		if !c.From.IsZero() {
			f := c.From
			v.From = &f
		}
		if d := c.Divergence; d != nil {
			v.Divergence = &UpgradeDivergence{Seq: d.Seq, Kind: string(d.Kind), Input: d.Input, What: d.What, Field: d.Field, Index: d.Index, Message: d.Msg}
			if !d.Want.IsZero() {
				h := d.Want
				v.Divergence.Want = &h
			}
			if !d.Got.IsZero() {
				h := d.Got
				v.Divergence.Got = &h
			}
		}
		switch c.Outcome {
		case kernel.UpgradeMoved:
			o.Counts.Moved++
		case kernel.UpgradeWouldMove:
			o.Counts.WouldMove++
		case kernel.UpgradeDiverged:
			o.Counts.Diverged++
		default:
			o.Counts.Other++
		}
		o.Cells = append(o.Cells, v)
	}
	return o
}

// Upgrade implements Writer.
func (l *Local) Upgrade(ctx context.Context, req UpgradeRequest) (*UpgradeOutput, error) {
	if req.Workflow == "" {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "workflow", "name the workflow whose cells move")
	}
	kreq := kernel.UpgradeRequest{Workflow: req.Workflow, All: req.All, Status: req.Status, DryRun: req.DryRun}
	if len(req.Keys) > 0 {
		def, err := l.workflow(req.Workflow)
		if err != nil {
			return nil, AsError(err, "workflow "+req.Workflow)
		}
		for i, raw := range req.Keys {
			k, err := ParseKey(l.W.Manifest(), def, string(raw))
			if err != nil {
				return nil, AsError(err, fmt.Sprintf("keys[%d]", i))
			}
			kreq.Keys = append(kreq.Keys, k)
		}
	}
	rep, err := l.W.Upgrade(ctx, kreq)
	if err != nil {
		return nil, AsError(err, "upgrade of workflow "+req.Workflow)
	}
	return UpgradeOutputOf(rep), nil
}

// Upgrade implements Writer over POST /v1/upgrade.
func (c *Client) Upgrade(ctx context.Context, req UpgradeRequest) (*UpgradeOutput, error) {
	var out UpgradeOutput
	if err := c.call(ctx, "POST", "/v1/upgrade", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// upgradeRoute is POST /v1/upgrade.
func (s *Server) upgradeRoute(w http.ResponseWriter, r *http.Request) {
	var req UpgradeRequest
	in := body{into: &req, shape: `body is not {"workflow": NAME, "keys"?: [JSON], "all"?: BOOL, "status"?: STATUS, "dry_run"?: BOOL}`}
	s.handle(w, r, "upgrade", in, func() (any, error) {
		return s.Backend.Upgrade(r.Context(), req)
	})
}

// ReplayManifest implements Reader: the offline check of a manifest
// against this world's journal (kernel.ReplayManifest), changing nothing.
func (l *Local) ReplayManifest(ctx context.Context, req ReplayManifestRequest) (*UpgradeOutput, error) {
	m, err := LoadManifest(ApplyRequest{Path: req.Path, Files: req.Files}, l.W.CAS().Get)
	if err != nil {
		return nil, err
	}
	rep, err := kernel.ReplayManifest(ctx, kernel.Stores{CAS: l.W.CAS(), Journal: l.W.Journal()}, l.Config, m)
	if err != nil {
		return nil, AsError(err, "replay under manifest "+m.Name)
	}
	return UpgradeOutputOf(rep), nil
}

// ReplayManifest implements Reader over POST /v1/replay/manifest.
func (c *Client) ReplayManifest(ctx context.Context, req ReplayManifestRequest) (*UpgradeOutput, error) {
	var out UpgradeOutput
	if err := c.call(ctx, "POST", "/v1/replay/manifest", req, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// replayManifestRoute is POST /v1/replay/manifest. It reads its body as
// apply does (up to DefaultMaxApplyBytes: it may carry wasm artifacts).
func (s *Server) replayManifestRoute(w http.ResponseWriter, r *http.Request) {
	var req ReplayManifestRequest
	in := body{into: &req, limit: max(s.MaxBodyBytes, DefaultMaxApplyBytes),
		shape: `body is not {"files": [{"name", "content" | "base64"}] | "path"}`}
	s.handle(w, r, "replay under a manifest", in, func() (any, error) {
		return s.Backend.ReplayManifest(r.Context(), req)
	})
}
