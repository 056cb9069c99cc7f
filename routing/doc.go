// Package routing turns one ingress event into the list of workflow deliveries
// that routing.subscriptions asks for (DESIGN.md §6).
//
// It owns: matching subscriptions in manifest order, fan-out to every match,
// wrapping an event as a variant arm when the subscription names an arm of the
// workflow's variant event, extracting the key at key_field (dotted paths,
// including "$value." paths into variant values) and validating it against the
// workflow's key_schema.
//
// It must not touch: the journal, cells, or any clock. Routing is a pure
// function of (manifest, event schema, canonical event bytes); the kernel
// journals its result, so replay never re-routes.
//
// Receipts never pass through here: they go to the origin instance recorded
// with their intent.
package routing
