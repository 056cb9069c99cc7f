package api

import (
	"context"
	"fmt"
	"net/http"

	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/views"
)

// Limits implements Reader.
func (l *Local) Limits(ctx context.Context) (views.Limits, error) {
	if err := l.W.Sync(ctx); err != nil { // ordered after earlier changes
		return views.Limits{}, AsError(err, "limits")
	}
	return views.Limits(l.W.Limits()), nil
}

// SetLimits implements Writer.
func (l *Local) SetLimits(ctx context.Context, lim kernel.Limits) (*LimitsResult, error) {
	res, err := l.W.SetLimits(ctx, lim)
	if err != nil {
		return nil, AsError(err, "limits")
	}
	return LimitsResultOf(res), nil
}

// Limits implements Reader.
func (c *Client) Limits(ctx context.Context) (views.Limits, error) {
	var out struct {
		Limits views.Limits `json:"limits"`
	}
	err := c.call(ctx, "GET", "/v1/limits", nil, &out)
	return out.Limits, err
}

// SetLimits implements Writer. Zero fields keep their value; the daemon
// receives only the fields that are set.
func (c *Client) SetLimits(ctx context.Context, lim kernel.Limits) (*LimitsResult, error) {
	var out LimitsResult
	if err := c.call(ctx, "POST", "/v1/limits", lim.NonZero(), &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// limitsRoute is GET /v1/limits.
func (s *Server) limitsRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "limits", body{}, func() (any, error) {
		lim, err := s.Backend.Limits(r.Context())
		if err != nil {
			return nil, err
		}
		return map[string]any{"limits": lim}, nil
	})
}

// setLimitsRoute is POST /v1/limits: a JSON object of the limits to change.
func (s *Server) setLimitsRoute(w http.ResponseWriter, r *http.Request) {
	var lim kernel.Limits
	parse := func(b []byte) (err error) {
		if lim, err = ParseLimits(b); err != nil {
			return newError(http.StatusBadRequest, CodeInvalidInput, "request body", "%v", err)
		}
		return nil
	}
	s.handle(w, r, "limits", body{parse: parse}, func() (any, error) { return s.Backend.SetLimits(r.Context(), lim) })
}

// ParseLimits reads limits from JSON ({"max_steps_per_input": 100, ...})
// with the API's strict reader (views.Decode), refusing unknown names,
// names in another case and anything after the object (kernel.ErrInvalid):
// a misspelt limit must not be silently ignored, nor a stray character
// taken for the end of the body. The JSON side of limits lives here
// (Limits); the kernel checks the values (kernel.CheckLimits).
func ParseLimits(b []byte) (kernel.Limits, error) {
	var v views.Limits
	if err := views.Decode(b, &v); err != nil {
		return kernel.Limits{}, fmt.Errorf("%w: limits: %v", kernel.ErrInvalid, err)
	}
	l := kernel.Limits(v)
	if err := kernel.CheckLimits(l); err != nil {
		return kernel.Limits{}, err
	}
	return l, nil
}
