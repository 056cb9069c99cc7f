package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/records"
)

// Error codes of live manifests and pins (kernel/pins.go, docs/upgrades.md).
const (
	// CodePinned: an event routes to a cell pinned to an older manifest
	// that cannot take it (409); nothing was journaled.
	CodePinned = "pinned"
	// CodeNotDrained: a retire of a manifest instances are still pinned
	// to (409); the message lists them.
	CodeNotDrained = "not_drained"
	// CodeCurrentManifest: a retire of the current manifest (409).
	CodeCurrentManifest = "current_manifest"
)

// ManifestsPage is the answer of GET /v1/manifests: the live manifests in
// the order they were applied, the current one last.
type ManifestsPage struct {
	Manifests []LiveManifestView `json:"manifests"`
}

// LiveManifestView is one live manifest (kernel.ManifestInfo).
type LiveManifestView struct {
	Hash    string `json:"hash"`
	Name    string `json:"name"`
	Seq     uint64 `json:"seq"` // the manifest record that applied it
	Current bool   `json:"current"`
	// Pinned counts the instances on it by status: for an older manifest,
	// those pinned to it; for the current one, its instances that are not
	// at rest (its cells at rest are counted by GET /v1/status).
	Pinned InstanceCounts `json:"pinned"`
	// PinnedAtRest counts the instances at rest that stay on it because
	// the current manifest does not accept their state (part of
	// pinned.completed).
	PinnedAtRest int `json:"pinned_at_rest"`
	// Intents in flight of the instances on it.
	Intents int `json:"intents"`
	// Drained: nothing is on it any more; it can be retired (never said of
	// the current one).
	Drained bool `json:"drained"`
}

// RetireResult is the answer of POST /v1/manifests/{hash}/retire.
type RetireResult struct {
	Retired bool   `json:"retired"`
	Hash    string `json:"hash"`
	Name    string `json:"name"`
	Seq     uint64 `json:"seq"` // the retire record
}

// Manifests implements Reader.
func (l *Local) Manifests(ctx context.Context) ([]LiveManifestView, error) {
	ms, err := l.W.Manifests(ctx)
	if err != nil {
		return nil, AsError(err, "manifests")
	}
	out := make([]LiveManifestView, 0, len(ms))
	for _, m := range ms {
		out = append(out, LiveManifestView{Hash: m.Hash.String(), Name: m.Name, Seq: m.Seq, Current: m.Current,
			Pinned: InstanceCounts(m.Pinned), PinnedAtRest: m.PinnedAtRest, Intents: m.Intents, Drained: m.Drained})
	}
	return out, nil
}

// RetireManifest implements Writer.
func (l *Local) RetireManifest(ctx context.Context, hash string) (*RetireResult, error) {
	where := "manifest " + hash
	h, err := l.resolveManifest(ctx, hash)
	if err != nil {
		return nil, err
	}
	res, err := l.W.Retire(ctx, h)
	var nd *kernel.NotDrainedError
	switch {
	case err == nil:
		return &RetireResult{Retired: true, Hash: res.Hash.String(), Name: res.Name, Seq: res.Seq}, nil
	case errors.As(err, &nd):
		return nil, &Error{Status: http.StatusConflict, Code: CodeNotDrained, Where: where, err: err,
			Message: fmt.Sprintf("%v: %s; it can be retired once they finish or move (aosd manifests lists what is pinned)", err, describeBlockers(nd.Blockers, 10))}
	case errors.Is(err, kernel.ErrRetireCurrent):
		return nil, &Error{Status: http.StatusConflict, Code: CodeCurrentManifest, Where: where, err: err, Message: err.Error()}
	case errors.Is(err, kernel.ErrNotLive):
		return nil, &Error{Status: http.StatusNotFound, Code: CodeNotFound, Where: where, err: err,
			Message: err.Error() + " (aosd manifests lists the live ones)"}
	default:
		return nil, AsError(err, where)
	}
}

// describeBlockers names up to n instances pinned to a manifest.
func describeBlockers(bs []kernel.Blocker, n int) string {
	var parts []string
	for i, b := range bs {
		if i == n {
			parts = append(parts, fmt.Sprintf("and %d more", len(bs)-n))
			break
		}
		s := fmt.Sprintf("%s key %s (%s", b.Workflow, records.KeyJSON(b.Key), b.Status)
		if b.Reason != "" {
			s += ": " + b.Reason
		}
		parts = append(parts, s+")")
	}
	return strings.Join(parts, ", ")
}

// Manifests implements Reader.
func (c *Client) Manifests(ctx context.Context) ([]LiveManifestView, error) {
	var out ManifestsPage
	if err := c.call(ctx, "GET", "/v1/manifests", nil, &out); err != nil {
		return nil, err
	}
	return out.Manifests, nil
}

// RetireManifest implements Writer.
func (c *Client) RetireManifest(ctx context.Context, hash string) (*RetireResult, error) {
	var out RetireResult
	if err := c.call(ctx, "POST", "/v1/manifests/"+url.PathEscape(hash)+"/retire", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// manifestsRoute is GET /v1/manifests.
func (s *Server) manifestsRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "manifests", body{}, func() (any, error) {
		ms, err := s.Backend.Manifests(r.Context())
		if err != nil {
			return nil, err
		}
		return ManifestsPage{Manifests: ms}, nil
	})
}

// retireRoute is POST /v1/manifests/{hash}/retire (no body).
func (s *Server) retireRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "retire", body{}, func() (any, error) {
		return s.Backend.RetireManifest(r.Context(), r.PathValue("hash"))
	})
}
