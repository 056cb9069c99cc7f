package api

import (
	"context"
	"errors"
	"net/http"
	"net/url"

	"github.com/aos-kernel/aos/kernel"
)

// Error codes of the modules routes and of ingress parking (409).
const (
	// CodeNotAside: a resume of a module that is not set aside.
	CodeNotAside = "not_aside"
	// CodeParkedFull: an event would park one event more than
	// max_parked_per_instance for an instance that cannot take it now.
	CodeParkedFull = "parked_full"
)

// ModulePage is the answer of GET /v1/modules.
type ModulePage struct {
	Modules []ModuleView `json:"modules"`
}

// Modules implements Reader.
func (l *Local) Modules(ctx context.Context) ([]ModuleView, error) {
	ms, err := l.W.Modules(ctx)
	if err != nil {
		return nil, AsError(err, "modules")
	}
	return ModuleViews(ms), nil
}

// ResumeModule implements Writer.
func (l *Local) ResumeModule(ctx context.Context, module string) (*ResumeResult, error) {
	res, err := l.W.ResumeModule(ctx, module)
	if err != nil {
		if errors.Is(err, kernel.ErrNotAside) {
			return nil, &Error{Status: http.StatusConflict, Code: CodeNotAside, Message: err.Error(), Where: "module " + module, err: err}
		}
		return nil, AsError(err, "module "+module)
	}
	out := ResumeResult(res)
	return &out, nil
}

// Modules implements Reader.
func (c *Client) Modules(ctx context.Context) ([]ModuleView, error) {
	var out ModulePage
	if err := c.call(ctx, "GET", "/v1/modules", nil, &out); err != nil {
		return nil, err
	}
	return out.Modules, nil
}

// ResumeModule implements Writer.
func (c *Client) ResumeModule(ctx context.Context, module string) (*ResumeResult, error) {
	var out ResumeResult
	if err := c.call(ctx, "POST", "/v1/modules/"+url.PathEscape(module)+"/resume", nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// modulesRoute is GET /v1/modules.
func (s *Server) modulesRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "modules", body{}, func() (any, error) {
		ms, err := s.Backend.Modules(r.Context())
		if err != nil {
			return nil, err
		}
		return ModulePage{Modules: ms}, nil
	})
}

// resumeRoute is POST /v1/modules/{module}/resume (no body).
func (s *Server) resumeRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "resume", body{}, func() (any, error) {
		return s.Backend.ResumeModule(r.Context(), r.PathValue("module"))
	})
}
