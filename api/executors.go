package api

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// KeyView is a trusted executor key as the API and CLI show it.
type KeyView struct {
	Name      string `json:"name"`
	ID        string `json:"id"`
	PublicKey string `json:"public_key"` // PEM
	// Effects the key may settle and send frames for: effect names and
	// "ns/*" namespaces. Empty for a key from a keyring file written before
	// keys had effects: it settles nothing until added again with effects.
	Effects []string `json:"effects"`
}

func keyView(k receipts.Key) KeyView {
	pem, _ := receipts.EncodePublicKey(k.Public)
	return KeyView{Name: k.Name, ID: k.ID, PublicKey: string(pem), Effects: append([]string{}, k.Effects...)}
}

func keyViews(kr *receipts.Keyring) []KeyView {
	out := []KeyView{}
	for _, k := range kr.List() {
		out = append(out, keyView(k))
	}
	return out
}

// Keys are a world's trusted executor keys as the API lists and changes
// them: the keyring the kernel verifies receipts with (shared, so a key
// added takes effect at once) and the file that keeps it (the world
// directory's executors.json), rewritten on every change. Safe for
// concurrent use.
type Keys struct {
	mu   sync.Mutex
	save func(*receipts.Keyring) error // makes the keyring durable where it is kept
	kr   *receipts.Keyring
}

// NewKeys serves kr, kept in file.
func NewKeys(file string, kr *receipts.Keyring) *Keys {
	return NewKeysSaving(func(kr *receipts.Keyring) error { return receipts.WriteKeyringFile(file, kr) }, kr)
}

// NewKeysSaving serves kr, made durable by save after every change (a
// world on PostgreSQL keeps its keyring in the database). A change save
// refuses is undone.
func NewKeysSaving(save func(*receipts.Keyring) error, kr *receipts.Keyring) *Keys {
	return &Keys{save: save, kr: kr}
}

func (k *Keys) list() []KeyView { return keyViews(k.kr) }

// add trusts a key for the effects named. The built-in executors' name is
// refused (only executor.key signs as them), and so are no effects, "*",
// and sys/ effects (receipts.CheckEffects). Adding a key the file holds
// without effects (written before keys had effects) gives it the effects.
func (k *Keys) add(name, pubPEM string, effs []string) (KeyView, error) {
	pub, err := receipts.DecodePublicKey([]byte(pubPEM))
	if err != nil {
		return KeyView{}, &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput, Where: "public_key", Message: err.Error(), err: err}
	}
	if name == receipts.BuiltinExecutor {
		return KeyView{}, newError(http.StatusBadRequest, CodeInvalidInput, "name",
			"%s is the built-in executors' name; only the world's executor.key signs as it", receipts.BuiltinExecutor)
	}
	if _, err := receipts.CheckEffects(name, effs); err != nil {
		return KeyView{}, &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput, Where: "effects", Message: err.Error(), err: err}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	before, err := k.kr.MarshalCBOR()
	if err != nil {
		return KeyView{}, err
	}
	if err := k.kr.Add(name, pub, effs); err != nil {
		if errors.Is(err, receipts.ErrDuplicateKey) {
			return KeyView{}, &Error{Status: http.StatusConflict, Code: CodeConflict, Where: "public_key", Message: err.Error(), err: err}
		}
		return KeyView{}, &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput, Where: "name", Message: err.Error(), err: err}
	}
	if err := k.save(k.kr); err != nil {
		_ = k.kr.UnmarshalCBOR(before) // as it was: the file was not changed
		return KeyView{}, err
	}
	id := receipts.KeyID(pub)
	for _, key := range k.kr.List() {
		if key.ID == id {
			return keyView(key), nil
		}
	}
	return KeyView{}, fmt.Errorf("key %s vanished from the keyring", id)
}

func (k *Keys) remove(id string) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, kv := range k.kr.List() {
		if kv.ID == id && kv.Name == receipts.BuiltinExecutor {
			return newError(http.StatusBadRequest, CodeInvalidInput, id, "the built-in executors' key cannot be removed")
		}
	}
	before, err := k.kr.MarshalCBOR()
	if err != nil {
		return err
	}
	if err := k.kr.Remove(id); err != nil {
		return &Error{Status: http.StatusNotFound, Code: CodeNotFound, Where: id, Message: err.Error(), err: err}
	}
	if err := k.save(k.kr); err != nil {
		_ = k.kr.UnmarshalCBOR(before) // as it was: the file was not changed
		return err
	}
	return nil
}

// Executors is the executor side of a serving world: the dispatcher running
// built-in executors and leasing the rest to external ones.
type Executors struct {
	W          *kernel.World
	Dispatcher *effects.Dispatcher
	// Keyring is the world's trusted executor keys (the kernel's): a claim
	// is leased only to an executor with a key trusted for every effect it
	// names. Nil: no executor is trusted, and every claim is refused.
	Keyring *receipts.Keyring
}

// maxLeaseMs caps a claim's lease (one hour): a crashed executor must not
// hold an intent for longer.
const maxLeaseMs = 3_600_000

// maxClaim caps how many intents one claim takes.
const maxClaim = 1000

// ClaimRequest is POST /v1/effects/claim.
type ClaimRequest struct {
	Executor string   `json:"executor"`
	Effects  []string `json:"effects"`
	Max      int      `json:"max,omitempty"`      // default 1, at most 1000
	LeaseMs  int64    `json:"lease_ms,omitempty"` // default 30000, at most 3600000
	WaitMs   int64    `json:"wait_ms,omitempty"`  // long-poll up to this long for work (at most 60000)
}

// ClaimAnswer is what POST /v1/effects/claim answers: the intents leased,
// and the world's identity, which every receipt and frame for them must
// name (docs/executor-protocol.md).
type ClaimAnswer struct {
	Intents []ClaimedIntent `json:"intents"`
	World   string          `json:"world"`
}

// ClaimedIntent is one intent leased to an external executor.
type ClaimedIntent struct {
	Hash           string          `json:"hash"`
	Effect         string          `json:"effect"`
	Params         json.RawMessage `json:"params"`
	ParamsCBOR     string          `json:"params_cbor"` // base64 of the canonical CBOR
	OriginWorkflow string          `json:"origin_workflow"`
	OriginKey      json.RawMessage `json:"origin_key"`
	IssuerRef      string          `json:"issuer_ref,omitempty"`
	EmittedAt      uint64          `json:"emitted_at"`
	LeaseUntil     time.Time       `json:"lease_until"`
	// Retry is the effect's retry policy from the manifest, so an external
	// executor retries transient failures as the built-in ones do; absent
	// when the effect declares none (the executor chooses).
	Retry *manifest.RetryPolicy `json:"retry,omitempty"`
}

func (x *Executors) claim(ctx context.Context, req ClaimRequest) ([]ClaimedIntent, error) {
	if req.Executor == "" || len(req.Effects) == 0 {
		return nil, newError(http.StatusBadRequest, CodeInvalidInput, "request body", `"executor" and "effects" are required`)
	}
	for _, f := range []struct {
		name string
		v    int64
	}{{"max", int64(req.Max)}, {"lease_ms", req.LeaseMs}, {"wait_ms", req.WaitMs}} {
		if f.v < 0 {
			return nil, newError(http.StatusBadRequest, CodeInvalidInput, f.name, "%s is %d; want 0 (the default) or more", f.name, f.v)
		}
	}
	// A stopped world could settle nothing it hands out: say so rather
	// than answer "no work" to an executor that would poll on.
	if err := x.W.Usable(); err != nil { // checked before the claim
		return nil, err
	}
	if err := x.trusted(req.Executor, req.Effects); err != nil {
		return nil, err
	}
	// Over their caps, max, lease_ms and wait_ms are capped (documented):
	// the answer's lease_until says what lease was granted.
	if req.Max == 0 {
		req.Max = 1
	}
	req.Max = min(req.Max, maxClaim)
	lease := 30 * time.Second
	if req.LeaseMs > 0 {
		lease = time.Duration(min(req.LeaseMs, maxLeaseMs)) * time.Millisecond
	}
	wait := min(time.Duration(req.WaitMs)*time.Millisecond, time.Minute)
	got, err := x.Dispatcher.Claim(ctx, req.Executor, req.Effects, req.Max, lease, wait)
	if err != nil {
		return nil, err
	}
	out := make([]ClaimedIntent, 0, len(got))
	for _, c := range got {
		params, err := schemas.ToJSON(c.Params)
		if err != nil {
			return nil, err
		}
		out = append(out, ClaimedIntent{Hash: c.Hash.String(), Effect: c.Effect, Params: params,
			ParamsCBOR: base64.StdEncoding.EncodeToString(c.Params), OriginWorkflow: c.OriginWorkflow,
			OriginKey: records.KeyJSON(c.OriginKey), IssuerRef: c.IssuerRef, EmittedAt: c.EmittedAt, LeaseUntil: c.LeaseUntil, Retry: c.Retry})
	}
	return out, nil
}

// trusted refuses a claim by executor for effects unless a key trusted under
// that name may settle each of them (403 untrusted, naming the executor and
// the effects). A claim leases intents away from the executors that could
// settle them: an executor whose receipts would be refused would only hold
// them until its leases ran out.
func (x *Executors) trusted(executor string, effects []string) error {
	var refused []string
	for _, e := range effects {
		if x.Keyring == nil || !x.Keyring.Trusts(executor, e) {
			refused = append(refused, e)
		}
	}
	if len(refused) == 0 {
		return nil
	}
	var allowed []string
	if x.Keyring != nil {
		for _, k := range x.Keyring.List() {
			if k.Name == executor {
				allowed = append(allowed, k.Effects...)
			}
		}
	}
	slices.Sort(allowed)
	has := "no key is trusted under that name"
	if len(allowed) > 0 {
		has = "its keys may settle " + strings.Join(slices.Compact(allowed), ", ")
	}
	return newError(http.StatusForbidden, CodeUntrusted, "executor "+executor,
		"executor %s may not claim %s: %s; trust a key for it first (aosd keys add %s PUBLIC_KEY_FILE --effects %s)",
		executor, strings.Join(refused, ", "), has, executor, strings.Join(refused, ","))
}

// receiptError maps the kernel's receipt and frame outcomes to API errors.
func receiptError(err error, where string) *Error {
	switch {
	case errors.Is(err, kernel.ErrUntrusted):
		return &Error{Status: http.StatusForbidden, Code: CodeUntrusted, Where: where, Message: err.Error(), err: err}
	case errors.Is(err, kernel.ErrWrongWorld):
		return &Error{Status: http.StatusForbidden, Code: CodeWrongWorld, Where: where, Message: err.Error(), err: err}
	case errors.Is(err, kernel.ErrReceiptDropped):
		return &Error{Status: http.StatusConflict, Code: CodeDropped, Where: where, Message: err.Error(), err: err}
	case errors.Is(err, kernel.ErrReceiptDuplicate):
		return &Error{Status: http.StatusConflict, Code: CodeDuplicate, Where: where, Message: err.Error(), err: err}
	case errors.Is(err, kernel.ErrReceiptUnknown):
		return &Error{Status: http.StatusNotFound, Code: CodeUnknownIntent, Where: where, Message: err.Error(), err: err}
	case errors.Is(err, kernel.ErrIntentCancelled): // a receipt or frame for an intent an operator cancelled
		return &Error{Status: http.StatusConflict, Code: CodeCancelled, Where: where, Message: err.Error(), err: err}
	case errors.Is(err, kernel.ErrFrameRefused):
		return &Error{Status: http.StatusConflict, Code: CodeFrameRefused, Where: where, Message: err.Error(), err: err}
	case errors.Is(err, receipts.ErrMalformed):
		return &Error{Status: http.StatusBadRequest, Code: CodeInvalidInput, Where: where, Message: err.Error(), err: err}
	}
	return AsError(err, where)
}

func (s *Server) claimRoute(w http.ResponseWriter, r *http.Request) {
	var req ClaimRequest
	s.handle(w, r, "claim", body{into: &req}, func() (any, error) {
		got, err := s.Executors.claim(r.Context(), req)
		if err != nil {
			return nil, err
		}
		return ClaimAnswer{World: s.Executors.W.Identity(), Intents: got}, nil
	})
}

func (s *Server) receiptRoute(w http.ResponseWriter, r *http.Request) {
	var sr receipts.SignedReceipt
	parse := func(b []byte) (err error) {
		if sr, err = receipts.FromJSON(b); err != nil {
			return receiptError(err, "receipt")
		}
		return nil
	}
	s.handle(w, r, "receipt", body{parse: parse}, func() (any, error) {
		res, err := s.Executors.W.SubmitReceipt(r.Context(), sr)
		if err != nil {
			return nil, receiptError(err, "receipt for intent "+sr.Intent.String())
		}
		return ReceiptResult(res), nil
	})
}

// frameRoute takes a signed frame in the JSON form of receipts.FrameFromJSON.
func (s *Server) frameRoute(w http.ResponseWriter, r *http.Request) {
	var sf receipts.SignedFrame
	parse := func(b []byte) (err error) {
		if sf, err = receipts.FrameFromJSON(b); err != nil {
			return receiptError(err, "frame")
		}
		return nil
	}
	s.handle(w, r, "frame", body{parse: parse}, func() (any, error) {
		seq, err := s.Executors.W.SubmitFrame(r.Context(), sf)
		if err != nil {
			return nil, receiptError(err, "frame for intent "+sf.Intent.String())
		}
		return map[string]uint64{"seq": seq}, nil
	})
}

func (s *Server) intentRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "intent "+r.PathValue("hash"), body{}, func() (any, error) {
		return s.Backend.TraceIntent(r.Context(), r.PathValue("hash"))
	})
}

func (s *Server) keysRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "keys", body{}, func() (any, error) { return s.Backend.Keys(r.Context()) })
}

// AddKeyRequest is POST /v1/keys.
type AddKeyRequest struct {
	Name      string   `json:"name"`
	PublicKey string   `json:"public_key"` // PEM (PKIX)
	Effects   []string `json:"effects"`    // what the key may settle: effect names, "ns/*" namespaces
}

func (s *Server) addKeyRoute(w http.ResponseWriter, r *http.Request) {
	var req AddKeyRequest
	s.handle(w, r, "keys", body{into: &req}, func() (any, error) {
		kv, err := s.Backend.AddKey(r.Context(), req.Name, req.PublicKey, req.Effects)
		if err != nil {
			return nil, err
		}
		s.Logger.Info("executor key trusted", "name", kv.Name, "key_id", kv.ID, "effects", kv.Effects)
		return kv, nil
	})
}

func (s *Server) removeKeyRoute(w http.ResponseWriter, r *http.Request) {
	s.handle(w, r, "key "+r.PathValue("id"), body{}, func() (any, error) {
		if err := s.Backend.RemoveKey(r.Context(), r.PathValue("id")); err != nil {
			return nil, err
		}
		s.Logger.Info("executor key removed", "key_id", r.PathValue("id"))
		return map[string]bool{"removed": true}, nil
	})
}

// TraceIntent implements Reader.
func (l *Local) TraceIntent(ctx context.Context, hash string) ([]views.TraceEntry, error) {
	h, err := l.resolveIntent(ctx, hash, CodeNotFound)
	if err != nil {
		return nil, err
	}
	log := l.W.Journal()
	first := log.First()
	es, err := records.TraceIntent(ctx, log, h)
	if err != nil {
		return nil, err
	}
	tr := views.TraceView(es)
	if err := views.StampTimes(ctx, log, tr); err != nil {
		return nil, err
	}
	if len(tr) == 0 {
		if first > 1 {
			return nil, newError(http.StatusNotFound, CodeNotFound, hash, "no intent with this hash in the journal, which starts at seq %d: retention (aosd gc --drop-journal) dropped the records before it", first)
		}
		return nil, newError(http.StatusNotFound, CodeNotFound, hash, "no intent with this hash in the journal")
	}
	return tr, nil
}

// keyStore is the world's keys: those the Local was given, else those
// LoadKeys reads, once.
func (l *Local) keyStore() (*Keys, error) {
	if l.keys != nil {
		return l.keys, nil
	}
	if l.LoadKeys == nil {
		return nil, newError(http.StatusInternalServerError, CodeInternal, "keys", "no world directory")
	}
	ks, err := l.LoadKeys()
	if err != nil {
		return nil, err
	}
	l.keys = ks
	return l.keys, nil
}

// Keys implements Reader.
func (l *Local) Keys(context.Context) ([]KeyView, error) {
	ks, err := l.keyStore()
	if err != nil {
		return nil, err
	}
	return ks.list(), nil
}

// AddKey implements Writer.
func (l *Local) AddKey(_ context.Context, name, pubPEM string, effects []string) (KeyView, error) {
	ks, err := l.keyStore()
	if err != nil {
		return KeyView{}, err
	}
	return ks.add(name, pubPEM, effects)
}

// RemoveKey implements Writer.
func (l *Local) RemoveKey(_ context.Context, id string) error {
	ks, err := l.keyStore()
	if err != nil {
		return err
	}
	return ks.remove(id)
}

// TraceIntent implements Reader.
func (c *Client) TraceIntent(ctx context.Context, hash string) ([]views.TraceEntry, error) {
	var out []views.TraceEntry
	err := c.call(ctx, "GET", "/v1/intents/"+hash, nil, &out)
	return out, err
}

// Keys implements Reader.
func (c *Client) Keys(ctx context.Context) ([]KeyView, error) {
	var out []KeyView
	err := c.call(ctx, "GET", "/v1/keys", nil, &out)
	return out, err
}

// AddKey implements Writer.
func (c *Client) AddKey(ctx context.Context, name, pubPEM string, effects []string) (KeyView, error) {
	var out KeyView
	err := c.call(ctx, "POST", "/v1/keys", AddKeyRequest{Name: name, PublicKey: pubPEM, Effects: effects}, &out)
	return out, err
}

// RemoveKey implements Writer.
func (c *Client) RemoveKey(ctx context.Context, id string) error {
	return c.call(ctx, "DELETE", "/v1/keys/"+id, nil, nil)
}
