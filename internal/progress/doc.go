// Package progress draws progress bars on a terminal for the CLI's long
// operations: snapshot (cells materialized), replay (records), verify (two
// replays), gc (objects marked, then swept). It owns only the drawing; the
// operations report through the Bar interface and never learn whether anyone
// is watching. It imports nothing of this module.
//
// Invariants:
//
//   - A disabled Reporter writes nothing and its Bars cost an empty method
//     call and no allocation, so the kernel may call Add once per record.
//     Enabled says when to enable one: only when the output is a terminal and
//     --json was not asked for, so piped, redirected and machine-read output
//     stays clean.
//   - A Bar is safe for concurrent use: Set and Add are single atomic
//     operations on the count, and drawing happens on the rendering
//     library's own goroutine, at most once per refresh interval, never in
//     the caller's. Finish has that goroutine draw the final frame, waits
//     for it and stops it; the frame shows the count as it stands (not
//     forced to the total, so an operation that stopped early is shown
//     where it stopped).
//
// Rendering is github.com/cheggaaa/pb/v3, chosen over
// github.com/schollz/progressbar/v3 and github.com/vbauerster/mpb/v8 (all
// three maintained) for how it counts: its Add is one atomic add and a ticker
// goroutine does the drawing, which is exactly the throttling we want.
// schollz/progressbar takes a mutex and may draw inside every Add, in the
// reporting goroutine, and fakes an unknown total by counting modulo the bar
// width; mpb sends every increment through a channel to its goroutine. pb
// writes to any io.Writer and, given a total of 0, shows the count alone. Its
// one cost: on import, on Linux and the BSDs, it opens /dev/tty (falling back
// to stdin) to ask the terminal's width, so a binary that links this package
// holds that descriptor.
package progress
