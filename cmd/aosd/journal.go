package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

func cmdJournal(fs *flag.FlagSet, a *app) func([]string) error {
	from := fs.Uint64("from", 1, "first sequence number")
	limit := fs.Int("limit", 0, "at most this many records (0: all)")
	kind := fs.String("kind", "", "only records of these kinds, comma-separated ("+strings.Join(api.RecordKinds(), ", ")+")")
	follow := fs.Bool("follow", false, "keep printing new records until interrupted")
	subs := map[string]func([]string) error{}
	for name, sub := range journalSubcommands {
		subs[name] = sub(fs, a)
	}
	return func(pos []string) error {
		if len(pos) > 0 && subs[pos[0]] != nil {
			return subs[pos[0]](pos[1:])
		}
		if err := wantArgs(pos, 0, 0, "no arguments (or a subcommand: "+strings.Join(slices.Sorted(maps.Keys(subs)), ", ")+")"); err != nil {
			return err
		}
		if err := onlyFlags(fs, "listing the journal", "from", "limit", "kind", "follow"); err != nil {
			return err
		}
		q, err := api.ParseJournalQuery(func(k string) []string {
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
		q.Start = func(first uint64) {
			if q.From <= 1 && first > 1 {
				fmt.Fprintf(a.stderr, "aosd journal: %s\n", retainedFrom(first))
			}
		}
		return a.withReadConn(a.ctx, func(c *host.Conn) error {
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

// retainedFrom says where a journal that retention cut starts.
func retainedFrom(first uint64) string {
	return fmt.Sprintf("the journal starts at seq %d: retention (aosd gc --drop-journal) dropped the records before it", first)
}

// journalSubcommands are `aosd journal SUB [ARGS]`: each registers its
// flags on the journal's flag set (flags are parsed before the subcommand
// is known) and returns its body, which gets the arguments after SUB. A
// subcommand is one line here and a file of its own.
var journalSubcommands = map[string]func(fs *flag.FlagSet, a *app) func([]string) error{
	"check":  cmdJournalCheck,
	"verify": cmdJournalVerify,
}

// onlyFlags refuses, as a usage error, any flag given that is not among
// allowed or the flags every command has (--world, --json, --direct): the
// journal's subcommands share one flag set, and a flag of another is a
// mistake, never silently ignored.
func onlyFlags(fs *flag.FlagSet, doing string, allowed ...string) error {
	var bad []string
	fs.Visit(func(f *flag.Flag) {
		if !slices.Contains(allowed, f.Name) && !slices.Contains([]string{"world", "json", "direct"}, f.Name) {
			bad = append(bad, "--"+f.Name)
		}
	})
	if len(bad) > 0 {
		return usagef("%s does not take %s", doing, strings.Join(bad, ", "))
	}
	return nil
}

// journalDetail is one line about a described record (views.Describe),
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
		if b, ok := decodeBody[views.EventBody](body); ok {
			targets, _ := json.Marshal(b.Targets)
			return fmt.Sprintf("%s %s -> %s", b.Schema, compact(b.Value, 80), compact(targets, 80)), true
		}
	case "step":
		if b, ok := decodeBody[views.StepBody](body); ok {
			return fmt.Sprintf("%s key %s input %d -> %s", b.Workflow, b.Key, b.Input, hashText(b.StateHash)), true
		}
	case "intent":
		if b, ok := decodeBody[views.IntentBody](body); ok {
			return fmt.Sprintf("%s from %s key %s %s", b.Effect, b.OriginWorkflow, b.OriginKey, b.Hash), true
		}
	case "manifest":
		if b, ok := decodeBody[views.ManifestBody](body); ok {
			return fmt.Sprintf("%s %s", b.Name, b.Hash), true
		}
	case "fault":
		if b, ok := decodeBody[views.FaultBody](body); ok {
			return fmt.Sprintf("%s key %s: %s", b.Workflow, b.Key, b.Reason), true
		}
	case "checkpoint":
		if b, ok := decodeBody[views.CheckpointBody](body); ok {
			why, ok := checkpointReasons[b.Reason]
			if !ok {
				why = b.Reason
			}
			return "snapshot point (asked by " + why + ")", true
		}
	case "snapshot":
		if b, ok := decodeBody[views.SnapshotBody](body); ok {
			return fmt.Sprintf("of the state after checkpoint %d: %s (%d bytes)", b.Checkpoint, b.Object, b.Bytes), true
		}
	case "receipt", "drop":
		if b, ok := decodeBody[struct {
			Receipt struct {
				Effect, Executor, Status string
				IntentHash               string `json:"intent_hash"`
				KeyID                    string `json:"key_id"`
			}
			Rejected, Reason string
		}](body); ok {
			r := b.Receipt
			d := fmt.Sprintf("%s %s from %s (key %s) for %s", r.Effect, r.Status, r.Executor, r.KeyID, r.IntentHash)
			if b.Rejected != "" {
				d += ", payload rejected: " + b.Rejected
			}
			if b.Reason != "" {
				d += ", dropped: " + b.Reason
			}
			return d, true
		}
	case "frame":
		if b, ok := decodeBody[views.FrameBody](body); ok {
			d := fmt.Sprintf("frame %d from %s for %s", b.Seq, b.Executor, b.Intent)
			if b.KeyID == "" {
				d += " (unsigned)"
			}
			return d + " " + compact(b.Payload, 60), true
		}
	case "world":
		if b, ok := decodeBody[views.WorldBody](body); ok {
			return "identity " + b.ID, true
		}
	case "recover":
		if b, ok := decodeBody[views.RecoverBody](body); ok {
			return fmt.Sprintf("%s %s key %s: fault %d (input %d, %s)", b.Action, b.Workflow, b.Key, b.Fault, b.Input,
				recoverCounts(b.Skipped, b.Parked, b.DropParked)), true
		}
	case "cancel":
		if b, ok := decodeBody[views.CancelBody](body); ok {
			d := fmt.Sprintf("%s %s of %s key %s cancelled by %s", b.Effect, b.Intent, b.Workflow, b.Key, b.By)
			if b.Reason != "" {
				d += ": " + b.Reason
			}
			return d, true
		}
	case "module":
		if b, ok := decodeBody[views.ModuleBody](body); ok {
			if b.Action == records.ModuleResume {
				return fmt.Sprintf("resume %s: %d parked events delivered again (%s)", b.Module, b.Parked, b.Reason), true
			}
			return fmt.Sprintf("%s %s, holding %s: %s", b.Action, b.Module, strings.Join(b.Workflows, ", "), b.Reason), true
		}
	}
	return "", false
}

// recoverCounts words what a recover did with the events that came for the
// instance while it was failed.
func recoverCounts(skipped, parked uint64, dropped bool) string {
	var parts []string
	if skipped > 0 {
		parts = append(parts, fmt.Sprintf("%d skipped", skipped))
	}
	switch {
	case dropped:
		parts = append(parts, fmt.Sprintf("%d parked dropped", parked))
	case parked > 0:
		parts = append(parts, fmt.Sprintf("%d parked delivered", parked))
	}
	if len(parts) == 0 {
		return "nothing parked"
	}
	return strings.Join(parts, ", ")
}

// checkpointReasons words a checkpoint's reason (records.Checkpoint*).
var checkpointReasons = map[string]string{
	records.CheckpointRecords:  "record count, " + envSnapEvery,
	records.CheckpointTime:     "time, " + envSnapTime,
	records.CheckpointOperator: "an operator",
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
