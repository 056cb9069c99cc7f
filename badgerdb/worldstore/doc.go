// Package worldstore opens the stores of a world directory for code that
// must not name the storage engine: the kernel's own tests, which need a
// real durable store (crash and reopen tests) but, like the kernel, speak
// only to its ports. Which engine backs a world directory is decided here
// for them (and in the daemon for a running world).
//
// Only the kernel's external tests use it (it imports the kernel for the
// ports' types).
package worldstore
