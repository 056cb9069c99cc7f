package api

import (
	"bytes"
	"context"
	"encoding/hex"
	"fmt"
	"net/http"
	"strings"

	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
)

// Truncated hashes, as git takes them: wherever a route takes an intent's
// or a manifest's hash, a prefix of at least MinHashPrefix hex digits
// (with or without "sha256:") stands for the one hash that starts with it.
// Shorter is refused (400 invalid_input); a prefix no hash starts with is
// 404; one that more than one does is 409 ambiguous, listing them.

// MinHashPrefix is the fewest hex digits a truncated hash may have.
const MinHashPrefix = 8

// CodeAmbiguous: a truncated hash that more than one hash starts with
// (409); the message lists them (up to maxAmbiguous).
const CodeAmbiguous = "ambiguous"

const maxAmbiguous = 10

// hashPrefix reads s as a full hash (full true) or a truncated one: its
// lower-case hex digits.
func hashPrefix(s, what string) (h schemas.Hash, digits string, full bool, err error) {
	if h, err := schemas.ParseHash(s); err == nil {
		return h, "", true, nil
	}
	d := strings.ToLower(strings.TrimPrefix(s, schemas.HashPrefix))
	for _, c := range d {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return h, "", false, newError(http.StatusBadRequest, CodeInvalidInput, what+" "+s,
				"not %s hash: want sha256:<64 hex digits>, or a prefix of at least %d hex digits", article(what), MinHashPrefix)
		}
	}
	if len(d) == 64 { // a whole hash without "sha256:", or in upper case
		h, err := schemas.ParseHash(schemas.HashPrefix + d)
		return h, "", err == nil, err
	}
	if len(d) < MinHashPrefix || len(d) > 64 {
		return h, "", false, newError(http.StatusBadRequest, CodeInvalidInput, what+" "+s,
			"%q has %d hex digits: give the whole hash (64) or a prefix of at least %d", s, len(d), MinHashPrefix)
	}
	return h, d, false, nil
}

func article(what string) string {
	if what == "intent" {
		return "an intent"
	}
	return "a " + what
}

// uniquePrefix picks the one match of a prefix among candidates (sorted,
// distinct), or says why not.
// notFound is the code of a prefix nothing starts with (the route's 404
// code for an unknown hash).
func uniquePrefix(what, s, notFound string, matches []schemas.Hash, more bool) (schemas.Hash, error) {
	switch {
	case len(matches) == 1:
		return matches[0], nil
	case len(matches) == 0:
		return schemas.Hash{}, newError(http.StatusNotFound, notFound, what+" "+s, "no %s hash starts with %s", what, s)
	}
	names := make([]string, len(matches))
	for i, m := range matches {
		names[i] = m.String()
	}
	list := strings.Join(names, ", ")
	if more {
		list += ", ..."
	}
	return schemas.Hash{}, newError(http.StatusConflict, CodeAmbiguous, what+" "+s,
		"%s is ambiguous: %d or more %s hashes start with it: %s; give more digits", s, len(matches), what, list)
}

// resolveIntent is the intent hash s names: whole, or a unique prefix of
// an intent the journal holds (its intent records are scanned, skipping
// the bodies that cannot hold the prefix's whole bytes).
// notFound is the route's code for an intent it does not know.
func (l *Local) resolveIntent(ctx context.Context, s, notFound string) (schemas.Hash, error) {
	h, digits, full, err := hashPrefix(s, "intent")
	if err != nil || full {
		return h, err
	}
	raw, _ := hex.DecodeString(digits[:len(digits)&^1]) // the whole bytes of the prefix
	seen := map[schemas.Hash]bool{}
	var matches []schemas.Hash
	more := false
	_, err = journal.ReadRetained(l.W.Journal(), 1, func(r journal.Record) (bool, error) {
		if r.Kind != journal.KindIntent || !bytes.Contains(r.Body, raw) {
			return true, nil
		}
		if err := ctx.Err(); err != nil {
			return false, err
		}
		rec, err := records.Decode(r)
		if err != nil {
			return false, fmt.Errorf("journal seq %d: %w", r.Seq, err)
		}
		ir, ok := rec.(*records.IntentRec)
		if !ok || seen[ir.Hash] || !strings.HasPrefix(hex.EncodeToString(ir.Hash[:]), digits) {
			return true, nil
		}
		seen[ir.Hash] = true
		if len(matches) == maxAmbiguous {
			more = true
			return false, nil
		}
		matches = append(matches, ir.Hash)
		return true, nil
	})
	if err != nil {
		return h, AsError(err, "intent "+s)
	}
	return uniquePrefix("intent", s, notFound, matches, more)
}

// resolveManifest is the live manifest hash s names: whole, or a unique
// prefix of a live manifest's hash.
func (l *Local) resolveManifest(ctx context.Context, s string) (schemas.Hash, error) {
	h, digits, full, err := hashPrefix(s, "manifest")
	if err != nil || full {
		return h, err
	}
	ms, err := l.W.Manifests(ctx)
	if err != nil {
		return h, AsError(err, "manifest "+s)
	}
	var matches []schemas.Hash
	for _, m := range ms {
		if strings.HasPrefix(hex.EncodeToString(m.Hash[:]), digits) {
			matches = append(matches, m.Hash)
		}
	}
	return uniquePrefix("live manifest", s, CodeNotFound, matches, false)
}
