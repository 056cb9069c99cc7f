package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aos-kernel/aos"
	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/daemon"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

func (a *app) printJSON(v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func cmdInit(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		pub, err := daemon.Init(daemon.Dir(a.world), a.kernelConfig())
		if err != nil {
			return err
		}
		abs, _ := filepath.Abs(a.world)
		if a.json {
			return a.printJSON(map[string]string{"world": abs, "executor_public_key": pub})
		}
		fmt.Fprintf(a.stdout, "created world %s\n  store         %s\n  api token     %s (0600)\n  executor key  %s (ed25519, PKCS#8 PEM, 0600)\n  executor pub  %s\n",
			abs, filepath.Join(abs, daemon.StoreDir), filepath.Join(abs, daemon.TokenFile), filepath.Join(abs, daemon.ExecutorKey), pub)
		return nil
	}
}

func cmdApply(fs *flag.FlagSet, a *app) func([]string) error {
	wait := fs.Duration("wait", 0, "wait up to this long for quiescence before applying (e.g. 30s)")
	dry := fs.Bool("dry-run", false, "validate and report what would change; change nothing")
	return func(pos []string) error {
		if err := wantArgs(pos, 1, 1, "PATH (a manifest file or directory)"); err != nil {
			return err
		}
		path := pos[0]
		// Validate locally first: problems name the user's own files.
		if _, err := manifest.Load(path); err != nil {
			return daemon.AsError(err, path)
		}
		return a.withConn(a.ctx, func(c *daemon.Conn) error {
			req := daemon.ApplyRequest{DryRun: *dry}
			if *wait > 0 {
				req.Wait = wait.String()
			}
			if c.Remote {
				files, err := daemon.ReadManifestFiles(path)
				if err != nil {
					return err
				}
				req.Files = files
			} else {
				req.Path = path
			}
			out, err := c.Apply(a.ctx, req)
			if out != nil {
				if a.json {
					if perr := a.printJSON(out); perr != nil {
						return perr
					}
				} else {
					printApply(a.stdout, out)
				}
			}
			return err
		})
	}
}

func printApply(w io.Writer, o *daemon.ApplyOutput) {
	fmt.Fprintf(w, "manifest %s %s\n", o.ManifestName, o.ManifestHash)
	if o.PreviousHash != nil {
		fmt.Fprintf(w, "previous %s\n", *o.PreviousHash)
	}
	ch := o.Changes
	for _, n := range ch.Added {
		fmt.Fprintf(w, "  + def %s\n", n)
	}
	for _, n := range ch.Removed {
		fmt.Fprintf(w, "  - def %s\n", n)
	}
	for _, n := range ch.Changed {
		fmt.Fprintf(w, "  ~ def %s\n", n)
	}
	sub := func(s manifest.Subscription) string {
		if s.KeyField != "" {
			return fmt.Sprintf("%s -> %s (key %s)", s.Event, s.Workflow, s.KeyField)
		}
		return fmt.Sprintf("%s -> %s", s.Event, s.Workflow)
	}
	for _, s := range ch.SubscriptionsAdded {
		fmt.Fprintf(w, "  + subscription %s\n", sub(s))
	}
	for _, s := range ch.SubscriptionsRemoved {
		fmt.Fprintf(w, "  - subscription %s\n", sub(s))
	}
	if len(o.BlockedBy) > 0 {
		fmt.Fprintf(w, "blocked by %d:\n", len(o.BlockedBy))
		for _, b := range o.BlockedBy {
			switch b.Kind {
			case "intent":
				fmt.Fprintf(w, "  intent %s %s from %s key %s\n", b.Intent, b.Effect, b.Workflow, b.Key)
			default:
				fmt.Fprintf(w, "  %s %s %s key %s\n", b.Kind, b.Status, b.Workflow, b.Key)
			}
		}
	}
	switch {
	case o.Applied:
		fmt.Fprintf(w, "applied at journal seq %d\n", o.Seq)
	case o.Unchanged:
		fmt.Fprintln(w, "unchanged: this manifest is already the world's manifest")
	case len(o.BlockedBy) > 0:
		fmt.Fprintln(w, "not applied: the world is not quiescent")
	case o.DryRun:
		fmt.Fprintln(w, "dry run: would apply; nothing changed")
	}
}

// readValue reads VALUE: JSON text, @file, or - for stdin.
func (a *app) readValue(arg string) (json.RawMessage, error) {
	var b []byte
	var err error
	src := "VALUE"
	switch {
	case arg == "-":
		src = "stdin"
		b, err = io.ReadAll(a.stdin)
	case strings.HasPrefix(arg, "@"):
		src = arg[1:]
		b, err = os.ReadFile(arg[1:])
	default:
		b = []byte(arg)
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", src, err)
	}
	if !json.Valid(b) {
		var v any
		jerr := json.Unmarshal(b, &v)
		return nil, fmt.Errorf("%s is not valid JSON: %v", src, jerr)
	}
	return json.RawMessage(strings.TrimSpace(string(b))), nil
}

func cmdSend(fs *flag.FlagSet, a *app) func([]string) error {
	wait := fs.Duration("wait", 0, "after the event is durable, wait up to this long for the world to be quiescent again")
	key := fs.String("idempotency-key", "", "send under this key: a resend with the same key (a retry after a timeout) is not journaled again and prints the original seq")
	return func(pos []string) error {
		if err := wantArgs(pos, 2, 2, "SCHEMA VALUE"); err != nil {
			return err
		}
		keySet := false
		fs.Visit(func(f *flag.Flag) { keySet = keySet || f.Name == "idempotency-key" })
		if keySet && *key == "" {
			return fmt.Errorf("--idempotency-key is empty; omit it, or give 1-%d visible ASCII characters", kernel.MaxIdempotencyKeyBytes)
		}
		val, err := a.readValue(pos[1])
		if err != nil {
			return err
		}
		return a.withConn(a.ctx, func(c *daemon.Conn) error {
			res, err := c.Send(a.ctx, []daemon.EventIn{{Schema: pos[0], Value: val, IdempotencyKey: *key}})
			if err != nil {
				return err
			}
			sent := res[0]
			quiet := (*bool)(nil)
			if *wait > 0 {
				q, err := c.WaitQuiescent(a.ctx, *wait)
				if err != nil {
					return err
				}
				quiet = &q
			}
			if a.json {
				out := map[string]any{"seq": sent.Seq, "duplicate": sent.Duplicate}
				if quiet != nil {
					out["quiescent"] = *quiet
				}
				return a.printJSON(out)
			}
			if sent.Duplicate {
				fmt.Fprintf(a.stdout, "event %s already journaled at seq %d under idempotency key %s; nothing journaled\n", pos[0], sent.Seq, *key)
			} else {
				fmt.Fprintf(a.stdout, "event %s journaled at seq %d\n", pos[0], sent.Seq)
			}
			if quiet != nil && !*quiet {
				fmt.Fprintf(a.stdout, "world not quiescent after %s (instances running or waiting on effects)\n", *wait)
			}
			return nil
		})
	}
}

func cmdStatus(fs *flag.FlagSet, a *app) func([]string) error {
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		return a.withConn(a.ctx, func(c *daemon.Conn) error {
			st, err := c.Status(a.ctx)
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(st)
			}
			w := newTable(a.stdout)
			mh := "(none: run aosd apply)"
			if st.ManifestHash != nil {
				mh = st.ManifestHash.String()
			}
			via := "direct (no daemon)"
			if c.Remote {
				via = "daemon at http://" + c.Addr
			}
			w.row("world", a.world)
			w.row("via", via)
			if st.ManifestName != "" {
				w.row("manifest", st.ManifestName)
			}
			w.row("manifest hash", mh)
			w.row("journal height", st.JournalHeight)
			w.row("quiescent", st.Quiescent)
			w.row("instances", fmt.Sprintf("running %d, waiting %d, completed %d, failed %d",
				st.Instances.Running, st.Instances.Waiting, st.Instances.Completed, st.Instances.Failed))
			w.row("in-flight intents", st.Inflight)
			w.row("queued effects", st.QueuedEffects)
			for _, name := range sortedKeys(st.Cells) {
				w.row("cells "+name, st.Cells[name])
			}
			return w.flush()
		})
	}
}

// listCells fetches one page of a workflow's cells or, with all, every page
// from q.After on, one request per page (q.Limit rows each, the maximum when
// 0), so the world is never held for more than a page.
func listCells(ctx context.Context, c *daemon.Conn, workflow string, q daemon.CellsQuery, all bool) (*daemon.CellPage, error) {
	if !all {
		return c.Cells(ctx, workflow, q)
	}
	if q.Limit == 0 {
		q.Limit = kernel.MaxCellPage
	}
	out := &daemon.CellPage{Cells: []daemon.CellInfo{}}
	for {
		p, err := c.Cells(ctx, workflow, q)
		if err != nil {
			return nil, err
		}
		out.Cells = append(out.Cells, p.Cells...)
		if p.Next == "" {
			return out, nil
		}
		q.After = p.Next
	}
}

// printCells prints a page as a table, then how many rows it held and, when
// more follow, the command that lists the next page.
func (a *app) printCells(workflow string, p *daemon.CellPage) error {
	w := newTable(a.stdout)
	w.row("KEY", "STATE_HASH", "SIZE", "STATUS", "LAST_ACTIVE")
	for _, ci := range p.Cells {
		last := "-"
		if ci.LastActive > 0 {
			last = time.Unix(0, int64(ci.LastActive)).UTC().Format(time.RFC3339)
		}
		st := ci.Status
		if ci.Reason != "" {
			st += " (" + ci.Reason + ")"
		}
		w.row(string(ci.Key), ci.StateHash.String(), ci.Size, st, last)
	}
	if err := w.flush(); err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "%d cell(s)\n", len(p.Cells))
	if p.Next != "" {
		fmt.Fprintf(a.stdout, "next page: aosd cells ls %s --after %s\n", workflow, p.Next)
	}
	return nil
}

func cmdCells(fs *flag.FlagSet, a *app) func([]string) error {
	limit := fs.Int("limit", 0, fmt.Sprintf("ls: cells per page (0: %d; at most %d; with --all, 0 means %d)",
		kernel.DefaultCellPage, kernel.MaxCellPage, kernel.MaxCellPage))
	after := fs.String("after", "", "ls: start after this cursor (the next of an earlier page)")
	all := fs.Bool("all", false, "ls: every cell from the cursor on, fetched a page at a time")
	return func(pos []string) error {
		if len(pos) == 0 {
			return usagef("want ls WORKFLOW or show WORKFLOW [KEY]")
		}
		switch pos[0] {
		case "ls":
			if err := wantArgs(pos, 2, 2, "ls WORKFLOW"); err != nil {
				return err
			}
			return a.withConn(a.ctx, func(c *daemon.Conn) error {
				p, err := listCells(a.ctx, c, pos[1], daemon.CellsQuery{Limit: *limit, After: *after}, *all)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(p)
				}
				return a.printCells(pos[1], p)
			})
		case "show":
			if err := wantArgs(pos, 2, 3, "show WORKFLOW [KEY]"); err != nil {
				return err
			}
			key := ""
			if len(pos) == 3 {
				key = pos[2]
			}
			return a.withConn(a.ctx, func(c *daemon.Conn) error {
				v, err := c.Cell(a.ctx, pos[1], key)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(v)
				}
				w := newTable(a.stdout)
				w.row("workflow", v.Workflow)
				w.row("key", string(v.Key))
				st := v.Status
				if v.Reason != "" {
					st += " (" + v.Reason + ")"
				}
				w.row("status", st)
				if v.StateHash != nil {
					w.row("state hash", v.StateHash.String())
					w.row("size", v.Size)
				}
				w.row("in-flight", len(v.Inflight))
				for _, h := range v.Inflight {
					w.row("  intent", h)
				}
				if err := w.flush(); err != nil {
					return err
				}
				fmt.Fprintf(a.stdout, "state:\n%s\n", indentJSON(v.State))
				return nil
			})
		default:
			return usagef("unknown cells subcommand %q (want ls or show)", pos[0])
		}
	}
}

func cmdTrace(fs *flag.FlagSet, a *app) func([]string) error {
	intent := fs.String("intent", "", "trace one intent by hash (sha256:...) instead of a cell")
	return func(pos []string) error {
		if *intent != "" {
			if err := wantArgs(pos, 0, 0, "no arguments with --intent"); err != nil {
				return err
			}
		} else if err := wantArgs(pos, 1, 2, "WORKFLOW [KEY]"); err != nil {
			return err
		}
		key := ""
		if len(pos) == 2 {
			key = pos[1]
		}
		return a.withConn(a.ctx, func(c *daemon.Conn) error {
			var tr []daemon.TraceEntry
			var err error
			if *intent != "" {
				tr, err = c.TraceIntent(a.ctx, *intent)
			} else {
				tr, err = c.Trace(a.ctx, pos[0], key)
			}
			if err != nil {
				return err
			}
			if a.json {
				return a.printJSON(tr)
			}
			w := newTable(a.stdout)
			w.row("SEQ", "KIND", "DETAIL")
			for _, e := range tr {
				w.row(e.Seq, string(e.Kind), traceDetail(e))
			}
			return w.flush()
		})
	}
}

func traceDetail(e daemon.TraceEntry) string {
	switch e.Kind {
	case "event":
		return fmt.Sprintf("%s %s", e.Schema, compact(e.Value, 100))
	case "step":
		s := fmt.Sprintf("input %d -> ", e.Input)
		if e.Deleted || e.StateHash == nil {
			s += "deleted"
		} else {
			s += "state " + e.StateHash.String()
		}
		if len(e.Emitted) > 0 {
			s += fmt.Sprintf(", emitted %v", e.Emitted)
		}
		if len(e.Intents) > 0 {
			s += fmt.Sprintf(", %d intent(s)", len(e.Intents))
		}
		return s
	case "intent":
		h := ""
		if len(e.Intents) > 0 {
			h = e.Intents[0].String()
		}
		return fmt.Sprintf("%s %s (emitted at %d)", e.Effect, h, e.Input)
	case "fault":
		return fmt.Sprintf("input %d: %s", e.Input, e.Reason)
	case "recover":
		return fmt.Sprintf("%s of fault %d (input %d, %d skipped)", e.Action, e.Fault, e.Input, e.Skipped)
	case "receipt", "drop":
		s := fmt.Sprintf("%s %s from %s", e.Effect, e.Status, e.Executor)
		if e.Attempt > 0 {
			s += fmt.Sprintf(" (attempt %d)", e.Attempt)
		}
		if len(e.Intents) > 0 {
			s += " for " + e.Intents[0].String()
		}
		if e.Reason != "" {
			s += ": " + e.Reason
		}
		return s
	case "frame":
		return fmt.Sprintf("frame %d from %s: %s", e.Attempt, e.Executor, compact(e.Value, 100))
	}
	b, _ := json.Marshal(e)
	return string(b)
}

func cmdKeys(fs *flag.FlagSet, a *app) func([]string) error {
	effs := fs.String("effects", "", "with add: the effects the key may settle and send frames for, comma-separated: effect names (com.acme/charge@1) and namespaces (com.acme/*); required")
	return func(pos []string) error {
		if len(pos) == 0 {
			return usagef("keys: want ls | add NAME PUBLIC_KEY_FILE --effects E[,E...] | rm KEY_ID")
		}
		if *effs != "" && pos[0] != "add" {
			return usagef("keys %s: --effects goes with add", pos[0])
		}
		return a.withConn(a.ctx, func(c *daemon.Conn) error {
			switch pos[0] {
			case "ls":
				if err := wantArgs(pos[1:], 0, 0, "no arguments"); err != nil {
					return err
				}
				ks, err := c.Keys(a.ctx)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(ks)
				}
				w := newTable(a.stdout)
				w.row("NAME", "KEY ID", "EFFECTS")
				for _, k := range ks {
					e := strings.Join(k.Effects, ",")
					if e == "" {
						e = "(none: add it again with --effects)"
					}
					w.row(k.Name, k.ID, e)
				}
				return w.flush()
			case "add":
				if err := wantArgs(pos[1:], 2, 2, "NAME PUBLIC_KEY_FILE --effects E[,E...]"); err != nil {
					return err
				}
				effects := splitList(*effs)
				if len(effects) == 0 {
					return usagef("keys add: --effects is required: name the effects the key may settle (e.g. --effects com.acme/charge@1,com.acme/refunds/*); a key is never trusted for every effect")
				}
				pem, err := os.ReadFile(pos[2])
				if err != nil {
					return fmt.Errorf("read public key: %w", err)
				}
				kv, err := c.AddKey(a.ctx, pos[1], string(pem), effects)
				if err != nil {
					return err
				}
				if a.json {
					return a.printJSON(kv)
				}
				fmt.Fprintf(a.stdout, "trusted %s as executor %q for %s\n", kv.ID, kv.Name, strings.Join(kv.Effects, ", "))
				return nil
			case "rm":
				if err := wantArgs(pos[1:], 1, 1, "KEY_ID"); err != nil {
					return err
				}
				if err := c.RemoveKey(a.ctx, pos[1]); err != nil {
					return err
				}
				if a.json {
					return a.printJSON(map[string]bool{"removed": true})
				}
				fmt.Fprintf(a.stdout, "removed %s\n", pos[1])
				return nil
			}
			return usagef("keys: unknown subcommand %q (want ls, add or rm)", pos[0])
		})
	}
}

// splitList splits a comma-separated flag value, dropping blanks around
// and between items.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

func cmdJournal(fs *flag.FlagSet, a *app) func([]string) error {
	from := fs.Uint64("from", 1, "first sequence number")
	limit := fs.Int("limit", 0, "at most this many records (0: all)")
	kind := fs.String("kind", "", "only records of these kinds, comma-separated (event, step, intent, receipt, drop, frame, manifest, snapshot, fault)")
	follow := fs.Bool("follow", false, "keep printing new records until interrupted")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		q, err := daemon.ParseJournalQuery(func(k string) []string {
			switch k {
			case "from":
				return []string{strconv.FormatUint(*from, 10)}
			case "limit":
				return []string{strconv.Itoa(*limit)}
			case "kind":
				return []string{*kind}
			case "follow":
				return []string{strconv.FormatBool(*follow)}
			}
			return nil
		})
		if err != nil {
			return usagef("%v", err)
		}
		return a.withConn(a.ctx, func(c *daemon.Conn) error {
			var tw *table
			if !a.json {
				tw = newTable(a.stdout)
				tw.row("SEQ", "KIND", "DETAIL")
				if q.Follow {
					tw.flush()
				}
			}
			err := c.Journal(a.ctx, q, func(line json.RawMessage) error {
				if a.json {
					_, err := fmt.Fprintf(a.stdout, "%s\n", line)
					return err
				}
				var r struct {
					Seq  uint64          `json:"seq"`
					Kind string          `json:"kind"`
					Body json.RawMessage `json:"body"`
				}
				if err := json.Unmarshal(line, &r); err != nil {
					return err
				}
				tw.row(r.Seq, r.Kind, journalDetail(r.Kind, r.Body))
				if q.Follow {
					return tw.flush()
				}
				return nil
			})
			if tw != nil {
				if ferr := tw.flush(); err == nil {
					err = ferr
				}
			}
			if a.ctx.Err() != nil {
				return nil // interrupted --follow
			}
			return err
		})
	}
}

// journalDetail is one line about a described record (daemon.Describe),
// read back into its typed body; a body of another shape is shown as JSON.
func journalDetail(kind string, body json.RawMessage) string {
	if d, ok := bodyDetail(kind, body); ok {
		return d
	}
	return compact(body, 120)
}

func bodyDetail(kind string, body json.RawMessage) (string, bool) {
	switch kind {
	case "event":
		if b, ok := decodeBody[daemon.EventBody](body); ok {
			targets, _ := json.Marshal(b.Targets)
			return fmt.Sprintf("%s %s -> %s", b.Schema, compact(b.Value, 80), compact(targets, 80)), true
		}
	case "step":
		if b, ok := decodeBody[daemon.StepBody](body); ok {
			return fmt.Sprintf("%s key %s input %d -> %s", b.Workflow, b.Key, b.Input, hashText(b.StateHash)), true
		}
	case "intent":
		if b, ok := decodeBody[daemon.IntentBody](body); ok {
			return fmt.Sprintf("%s from %s key %s %s", b.Effect, b.OriginWorkflow, b.OriginKey, b.Hash), true
		}
	case "manifest":
		if b, ok := decodeBody[daemon.ManifestBody](body); ok {
			return fmt.Sprintf("%s %s", b.Name, b.Hash), true
		}
	case "fault":
		if b, ok := decodeBody[daemon.FaultBody](body); ok {
			return fmt.Sprintf("%s key %s: %s", b.Workflow, b.Key, b.Reason), true
		}
	case "recover":
		if b, ok := decodeBody[daemon.RecoverBody](body); ok {
			return fmt.Sprintf("%s %s key %s: fault %d (input %d, %d skipped)", b.Action, b.Workflow, b.Key, b.Fault, b.Input, b.Skipped), true
		}
	}
	return "", false
}

func decodeBody[T any](body json.RawMessage) (*T, bool) {
	var b T
	if json.Unmarshal(body, &b) != nil {
		return nil, false
	}
	return &b, true
}

// hashText is a deleted state's hash as the journal listing shows it: empty.
func hashText(h *schemas.Hash) string {
	if h == nil {
		return ""
	}
	return h.String()
}

func cmdServe(fs *flag.FlagSet, a *app) func([]string) error {
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on (loopback by default; port 0 picks a free port)")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		return serve(a, *listen)
	}
}

func serve(a *app, listen string) error {
	dir := daemon.Dir(a.world)
	if err := dir.Check(); err != nil {
		return err
	}
	log := logger(a.stderr, slog.LevelInfo)
	w, err := aos.Open(a.ctx, a.world, aos.Options{Listen: listen, Logger: log, WasmCacheDir: os.Getenv(envWasmCache)})
	if err != nil {
		return err
	}
	fmt.Fprintf(a.stdout, "listening on http://%s\n", w.Addr())
	if f, ok := a.stdout.(*os.File); ok {
		f.Sync()
	}
	serr := w.Wait(a.ctx)
	log.Info("shutting down")
	cerr := w.Close()
	if serr != nil {
		return serr
	}
	if cerr != nil {
		return cerr
	}
	log.Info("stopped")
	return nil
}

func cmdDemo(fs *flag.FlagSet, a *app) func([]string) error {
	manifests := fs.String("manifests", filepath.Join("examples", "manifests"), "directory holding the example manifests")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		worldSet := false
		fs.Visit(func(f *flag.Flag) { worldSet = worldSet || f.Name == "world" })
		tmp, err := os.MkdirTemp("", "aos-demo-")
		if err != nil {
			return err
		}
		if !worldSet {
			a.world = filepath.Join(tmp, "world")
		}
		counter := filepath.Join(*manifests, "counter")
		if _, err := os.Stat(counter); err != nil {
			return fmt.Errorf("counter example not found at %s: run from the repository root or pass --manifests", counter)
		}
		// The manifest is built and applied from a copy, so the demo never
		// rewrites the repository's files (a Go release other than the one
		// that pinned the example's hash builds other bytes).
		m := filepath.Join(tmp, "counter")
		fmt.Fprintf(a.stdout, "$ cp %s %s/\n", filepath.Join(counter, "*.json"), m)
		if err := build.Copy(counter, m); err != nil {
			return err
		}
		step := func(world bool, args ...string) error {
			if world {
				args = append(args, "--world", a.world)
			}
			fmt.Fprintf(a.stdout, "\n$ aosd %s\n", strings.Join(quoteArgs(args), " "))
			code := run(a.ctx, args, a.stdin, a.stdout, a.stderr)
			if code != exitOK {
				return &exitCodeError{code}
			}
			return nil
		}
		if err := step(false, "build", m, "--sources-from", counter); err != nil {
			return err
		}
		wf := "com.example/counter.step@1"
		for _, s := range [][]string{
			{"init"},
			{"apply", m},
			{"send", "com.example/CountEvent@1", `{"key":"a","by":1}`},
			{"send", "com.example/CountEvent@1", `{"key":"a","by":41}`},
			{"send", "com.example/CountEvent@1", `{"key":"b","by":7}`},
			{"status"},
			{"cells", "ls", wf},
			{"cells", "show", wf, "a"},
			{"trace", wf, "a"},
			{"journal", "--limit", "6"},
		} {
			if err := step(true, s...); err != nil {
				return err
			}
		}
		fmt.Fprintf(a.stdout, "\nThe world is in %s; try: aosd serve --world %s\n", a.world, a.world)
		return nil
	}
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, s := range args {
		if strings.ContainsAny(s, ` "{}'`) {
			s = "'" + s + "'"
		}
		out[i] = s
	}
	return out
}
