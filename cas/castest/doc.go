// Package castest is the contract every cas.Store keeps, as tests any
// backend runs against itself: castest.Run(t, open). The in-memory store
// runs it in package cas, the Badger store in the Badger package, so the two
// are held to the same assertions rather than to two copies of them.
//
// It imports only cas and schemas; it must not name a backend.
package castest
