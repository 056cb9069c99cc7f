// Package randval generates the random field values the hand-written CBOR
// encoders are tested with (records, kernel): integers at every CBOR head
// width, nil, empty and filled byte slices, empty and filled strings. Tests
// only; a seed replays a run.
package randval
