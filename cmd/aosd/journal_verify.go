package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/views"
)

// maxExportLine bounds one line of an export file: a manifest record
// carries the manifest's source, and a value may be as large as the
// world's limits allow.
const maxExportLine = 256 << 20

// cmdJournalVerify is `aosd journal verify [--file EXPORT] [--keys KEYS]`:
// it re-verifies every receipt, drop and signed frame signature and every
// intent hash (views/verify.go) in the world's journal, read
// through its export as `aosd journal --json` prints it (through the
// daemon when one serves the world), or in an export file. The keys are
// the world's trusted keys (`aosd keys ls`) unless --keys names a file of
// them, so an export and a keys file verify with no world at all. Exit 1
// when anything fails, after the report.
func cmdJournalVerify(fs *flag.FlagSet, a *app) func([]string) error {
	file := fs.String("file", "", "with verify: an export to verify (aosd journal --json output; - for stdin) instead of the world's journal")
	keys := fs.String("keys", "", "with verify: the trusted keys to verify against, as aosd keys ls --json prints them (or an executors.json), instead of the world's")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments after verify"); err != nil {
			return err
		}
		if err := onlyFlags(fs, "journal verify", "file", "keys"); err != nil {
			return err
		}
		rep, err := a.journalVerify(*file, *keys)
		if err != nil {
			return err
		}
		if a.json {
			err = a.printJSON(rep)
		} else {
			src := rep.Source
			if *file == "" {
				src = "the journal of " + a.world
			}
			err = printJournalVerify(a.stdout, rep, src)
		}
		if err != nil || rep.OK {
			return err
		}
		return fmt.Errorf("%d record(s) failed verification", uint64(len(rep.Failures))+rep.Omitted)
	}
}

// journalVerify reads the keys and the records and verifies them.
func (a *app) journalVerify(file, keysFile string) (rep *views.JournalVerify, err error) {
	var conn *host.Conn
	if file == "" || keysFile == "" {
		if conn, err = a.connectRead(a.ctx); err != nil {
			return nil, err
		}
		defer func() {
			if cerr := conn.Close(); cerr != nil && err == nil {
				rep, err = nil, fmt.Errorf("close world: %w", cerr)
			}
		}()
	}
	v, err := a.verifier(conn, file, keysFile)
	if err != nil {
		return nil, err
	}
	if file != "" {
		if err := verifyFile(a, v, file); err != nil {
			return nil, err
		}
		return v.Report(), nil
	}
	var first uint64
	q := api.JournalQuery{From: 1, Kinds: views.VerifyKinds(), Start: func(f uint64) { first = f }}
	err = conn.Journal(a.ctx, q, func(line json.RawMessage) error {
		v.Line(0, line)
		return nil
	})
	if err != nil {
		return nil, err
	}
	rep = v.Report()
	if first > 1 {
		rep.First = first
	}
	return rep, nil
}

// verifier is a verifier over the keys of keysFile, or else of the world.
func (a *app) verifier(c *host.Conn, file, keysFile string) (*views.JournalVerifier, error) {
	source := "journal"
	if file != "" {
		source = file
	}
	if keysFile != "" {
		data, err := os.ReadFile(keysFile)
		if err != nil {
			return nil, fmt.Errorf("read keys: %w", err)
		}
		kr, err := api.ParseTrustedKeys(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", keysFile, err)
		}
		return views.NewJournalVerifier(kr, source), nil
	}
	keys, err := c.Keys(a.ctx)
	if err != nil {
		return nil, err
	}
	js, err := json.Marshal(keys)
	if err != nil {
		return nil, err
	}
	kr, err := api.ParseTrustedKeys(js)
	if err != nil {
		return nil, fmt.Errorf("the world's keys: %w", err)
	}
	return views.NewJournalVerifier(kr, source), nil
}

// verifyFile feeds the export file's lines to v; blank lines are skipped.
// The verifier's report is the caller's: this returns only errors reading
// the file.
func verifyFile(a *app, v *views.JournalVerifier, file string) error {
	var in io.Reader = a.stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return fmt.Errorf("read export: %w", err)
		}
		defer f.Close()
		in = f
	}
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxExportLine)
	var n uint64
	for sc.Scan() {
		n++
		if line := sc.Bytes(); len(strings.TrimSpace(string(line))) > 0 {
			v.Line(n, line)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return fmt.Errorf("%s line %d: longer than %d bytes", file, n+1, maxExportLine)
		}
		return fmt.Errorf("read %s: %w", file, err)
	}
	return nil
}

func printJournalVerify(w io.Writer, rep *views.JournalVerify, source string) error {
	checked := rep.Receipts + rep.Drops + rep.Frames + rep.Intents
	fmt.Fprintf(w, "verified %d of %d (%d receipts, %d drops, %d signed frames, %d intent hashes) in %d records of %s against %d trusted keys",
		rep.Verified, checked, rep.Receipts, rep.Drops, rep.Frames, rep.Intents, rep.Records, source, len(rep.Keys))
	if rep.Unreadable > 0 {
		fmt.Fprintf(w, "; %d lines unreadable", rep.Unreadable)
	}
	if rep.UnsignedFrames > 0 {
		fmt.Fprintf(w, "; %d frames unsigned (journaled before frames were signed), not verified", rep.UnsignedFrames)
	}
	if rep.First > 1 {
		fmt.Fprintf(w, "; %s", retainedFrom(rep.First))
	}
	if rep.OK {
		_, err := fmt.Fprintln(w, ": ok")
		return err
	}
	fmt.Fprintf(w, ": %d failed\n\n", uint64(len(rep.Failures))+rep.Omitted)
	t := newTable(w)
	t.row("SEQ", "KIND", "INTENT", "KEY ID", "REASON")
	for _, f := range rep.Failures {
		seq := fmt.Sprint(f.Seq)
		if f.Line != 0 {
			seq = fmt.Sprintf("%d (line %d)", f.Seq, f.Line)
		}
		intent, kind, key := "-", f.Kind, f.KeyID
		if f.Intent != nil {
			intent = f.Intent.String()
		}
		if kind == "" {
			kind = "-"
		}
		if key == "" {
			key = "-"
		}
		t.row(seq, kind, intent, key, f.Reason)
	}
	if err := t.flush(); err != nil {
		return err
	}
	if rep.Omitted > 0 {
		_, err := fmt.Fprintf(w, "... and %d more not listed\n", rep.Omitted)
		return err
	}
	return nil
}
