package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aos-kernel/aos/build"
	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/schemas"
)

// upgradeOut is `aosd upgrade --json` and `aosd replay --manifest --json`.
type upgradeOut struct {
	ManifestHash string `json:"manifest_hash"`
	DryRun       bool   `json:"dry_run"`
	Steps        int    `json:"steps"`
	Counts       struct {
		Moved     int `json:"moved"`
		WouldMove int `json:"would_move"`
		Diverged  int `json:"diverged"`
		Other     int `json:"other"`
	} `json:"counts"`
	Cells []struct {
		Key        json.RawMessage `json:"key"`
		Outcome    string          `json:"outcome"`
		From       *string         `json:"from"`
		Since      string          `json:"since"`
		Inputs     []uint64        `json:"inputs"`
		StateHash  *string         `json:"state_hash"`
		Seq        uint64          `json:"seq"`
		Divergence *struct {
			Seq     uint64 `json:"seq"`
			Kind    string `json:"kind"`
			Input   uint64 `json:"input"`
			What    string `json:"what"`
			Want    string `json:"want"`
			Got     string `json:"got"`
			Message string `json:"message"`
		} `json:"divergence"`
	} `json:"cells"`
}

// pinnedCell is `aosd cells show --json` with the pin.
type pinnedCell struct {
	Status    string          `json:"status"`
	State     json.RawMessage `json:"state"`
	StateHash string          `json:"state_hash"`
	Inflight  []string        `json:"inflight"`
	Pin       string          `json:"pin"`
}

func cellPin(t *testing.T, w, wf, key string) pinnedCell {
	t.Helper()
	var c pinnedCell
	jsonOut(t, w, &c, "cells", "show", wf, key)
	return c
}

// upgradeJSON runs an aosd command with --json that prints an upgrade
// report and wants exit code want.
func upgradeJSON(t *testing.T, w string, want int, args ...string) upgradeOut {
	t.Helper()
	r := aosd(t, w, append(args, "--json")...)
	var out upgradeOut
	if err := json.Unmarshal([]byte(r.stdout), &out); err != nil || r.code != want {
		t.Fatalf("aosd %v: exit %d (want %d), %v\nstdout: %s\nstderr: %s", args, r.code, want, err, r.stdout, r.stderr)
	}
	return out
}

// upgradeManifest is a copy of the built example manifest whose workflow
// runs entrypoint of the upgrade test module (testdata/upgrade/module),
// built from source with the flags aosd build uses.
func upgradeManifest(t *testing.T, example, entrypoint string) string {
	t.Helper()
	src, err := filepath.Abs(filepath.Join("testdata", "upgrade", "module"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := build.Package(context.Background(), "", src, filepath.Join(dir, "upgrade.wasm")); err != nil {
		t.Fatalf("build the upgrade test module: %v", err)
	}
	wasm, err := os.ReadFile(filepath.Join(dir, "upgrade.wasm"))
	if err != nil {
		t.Fatal(err)
	}
	from := built.Path(t, example)
	ents, err := os.ReadDir(from)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(from, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if e.Name() == "workflow.json" {
			var defs []map[string]any
			if err := json.Unmarshal(b, &defs); err != nil {
				t.Fatal(err)
			}
			for _, d := range defs {
				switch d["$kind"] {
				case "defmodule":
					d["runtime"] = map[string]any{"kind": "wasm", "artifact": "upgrade.wasm", "hash": schemas.HashBytes(wasm).String()}
				case "defworkflow":
					d["impl"].(map[string]any)["entrypoint"] = entrypoint
				}
			}
			if b, err = json.Marshal(defs); err != nil {
				t.Fatal(err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, e.Name()), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// manifestHashOf is the hash of the manifest at path.
func manifestHashOf(t *testing.T, path string) string {
	t.Helper()
	m, err := manifest.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	return m.Hash.String()
}

// TestUpgradeOrders, with a real daemon and real wasm modules built from
// source: three orders wait on their charges and 15-minute timers under
// the example's code. `aosd replay --manifest` says a compatible v2 could
// move them all (exit 0) and that a divergent one diverges at each
// order's creation step, naming it and both state hashes (exit 1). After
// `aosd apply --pin` of v2, a dry run moves nothing; `aosd upgrade --all`
// moves the three; a charge receipt then runs v2's code (its charge id
// marked "v2/"). An upgrade to the divergent code leaves its cell where it
// was, naming the step; `aosd replay --verify` reaches the live state.
func TestUpgradeOrders(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	priv, pubFile := newExecutorKey(t)
	ok(t, w, "keys", "add", compatPayments, pubFile, "--effects", chargeEffect)
	v1 := built.Path(t, "orders")
	ok(t, w, "apply", v1)
	v2 := upgradeManifest(t, "orders", "orders_v2")
	div := upgradeManifest(t, "orders", "orders_div")
	d := startDaemon(t, w)
	tok := token(t, w)
	for _, o := range []string{"o1", "o2", "o3"} {
		ok(t, w, "send", orderCreated, fmt.Sprintf(`{"order_id":%q,"amount_cents":500,"customer":"c"}`, o))
	}
	before := map[string]pinnedCell{}
	for _, o := range []string{"o1", "o2", "o3"} {
		if before[o] = cellPin(t, w, orderWF, o); before[o].Status != "waiting" || len(before[o].Inflight) != 2 {
			t.Fatalf("order %s: %+v, want waiting on its charge and timer", o, before[o])
		}
	}

	// The offline check, through the daemon.
	if rep := upgradeJSON(t, w, 0, "replay", "--manifest", v2); rep.Counts.WouldMove != 3 || rep.Counts.Diverged != 0 || rep.Steps < 3 {
		t.Fatalf("replay --manifest v2: %+v", rep)
	}
	rep := upgradeJSON(t, w, 1, "replay", "--manifest", div)
	if rep.Counts.Diverged != 3 {
		t.Fatalf("replay --manifest div: %+v", rep)
	}
	for _, c := range rep.Cells {
		dv := c.Divergence
		if dv == nil || dv.What != "state" || dv.Kind != "step" || dv.Seq <= dv.Input || dv.Want == dv.Got || dv.Want != before[strings.Trim(string(c.Key), `"`)].StateHash {
			t.Fatalf("divergence of %s: %+v", c.Key, dv)
		}
	}

	// The same check on an export, with no world: the export holds the
	// journal, not the code its manifests ran.
	export := filepath.Join(t.TempDir(), "export.jsonl")
	if err := os.WriteFile(export, []byte(ok(t, w, "journal", "--json")), 0o644); err != nil {
		t.Fatal(err)
	}
	if r := aosd(t, w, "replay", "--manifest", div, "--export", export); r.code != 1 || !strings.Contains(r.stderr, "give --artifacts DIR") ||
		!strings.Contains(r.stderr, "orders.wasm") {
		t.Fatalf("replay --export without the old code: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
	if rep := upgradeJSON(t, w, 1, "replay", "--manifest", div, "--export", export, "--artifacts", v1); rep.Counts.Diverged != 3 {
		t.Fatalf("replay --manifest div --export: %+v", rep)
	}
	if rep := upgradeJSON(t, w, 0, "replay", "--manifest", v2, "--export", export, "--artifacts", v1); rep.Counts.WouldMove != 3 {
		t.Fatalf("replay --manifest v2 --export: %+v", rep)
	}

	ok(t, w, "apply", v2, "--pin")
	v1Hash := manifestHashOf(t, v1)
	if c := cellPin(t, w, orderWF, "o1"); c.Pin != v1Hash {
		t.Fatalf("o1 after apply --pin: pin %q, want v1 %s", c.Pin, v1Hash)
	}
	height := getStatus(t, w).JournalHeight
	if dry := upgradeJSON(t, w, 0, "upgrade", orderWF, "o1", "--dry-run"); dry.Counts.WouldMove != 1 || !dry.DryRun {
		t.Fatalf("dry run: %+v", dry)
	}
	if h := getStatus(t, w).JournalHeight; h != height {
		t.Fatalf("a dry run journaled %d records", h-height)
	}
	up := upgradeJSON(t, w, 0, "upgrade", orderWF, "--all", "--status", "waiting")
	if up.Counts.Moved != 3 || len(up.Cells) != 3 {
		t.Fatalf("upgrade --all: %+v", up)
	}
	for _, c := range up.Cells {
		o := strings.Trim(string(c.Key), `"`)
		after := cellPin(t, w, orderWF, o)
		if c.Outcome != "moved" || c.Since != "creation" || *c.From != v1Hash || after.Pin != "" || after.StateHash != before[o].StateHash ||
			strings.Join(after.Inflight, ",") != strings.Join(before[o].Inflight, ",") || after.Status != "waiting" {
			t.Fatalf("order %s: %+v, after %+v", o, c, after)
		}
	}
	charges := claimCharges(t, d, tok, "o1", "o2", "o3")
	settleCharge(t, d, tok, priv, charges["o1"], "succeeded")
	if s := stateOf(t, showCell(t, w, orderWF, "o1")); s["status"] != "paid" || s["charge_id"] != "v2/"+chargeID(charges["o1"].Hash) {
		t.Fatalf("o1 after its charge under v2: %v", s)
	}

	// The divergent code is applied; o3 (pinned to v2 now) does not move.
	ok(t, w, "apply", div, "--pin")
	v2Hash := manifestHashOf(t, v2)
	bad := upgradeJSON(t, w, 1, "upgrade", orderWF, "o3")
	if c := bad.Cells[0]; c.Outcome != "diverged" || c.Divergence == nil || c.Divergence.What != "state" || c.Divergence.Seq == 0 ||
		!strings.Contains(c.Divergence.Message, "state hash") {
		t.Fatalf("upgrade of o3 to the divergent code: %+v", bad)
	}
	if c := cellPin(t, w, orderWF, "o3"); c.Pin != v2Hash || c.StateHash != before["o3"].StateHash {
		t.Fatalf("o3 after a divergent upgrade: %+v", c)
	}
	settleCharge(t, d, tok, priv, charges["o3"], "succeeded")
	if s := stateOf(t, showCell(t, w, orderWF, "o3")); s["charge_id"] != "v2/"+chargeID(charges["o3"].Hash) {
		t.Fatalf("o3 after its charge under its v2 pin: %v", s)
	}
	if r := aosd(t, w, "replay", "--verify"); r.code != 0 {
		t.Fatalf("replay --verify: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

// TestUpgradeTimerFires: a reminder waits on its timer (no daemon runs its
// executors yet); after an apply --pin of changed code and `aosd upgrade`,
// the daemon fires the timer and the new code takes its receipt.
func TestUpgradeTimerFires(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ok(t, w, "apply", built.Path(t, "reminders"))
	ok(t, w, "send", "com.example/ReminderSet@1", `{"reminder_id":"r1","text":"call","delay_ms":0}`)
	if c := cellPin(t, w, reminderWF, "r1"); c.Status != "waiting" {
		t.Fatalf("r1: %+v, want waiting on its timer", c)
	}
	ok(t, w, "apply", upgradeManifest(t, "reminders", "reminders_v2"), "--pin")
	if up := upgradeJSON(t, w, 0, "upgrade", reminderWF, "r1"); up.Counts.Moved != 1 {
		t.Fatalf("upgrade: %+v", up)
	}
	startDaemon(t, w)
	waitFor(t, "r1 to fire", func() bool { return cellPin(t, w, reminderWF, "r1").Status == "completed" })
	if s := stateOf(t, showCell(t, w, reminderWF, "r1")); s["status"] != "fired" || s["text"] != "call (v2)" {
		t.Fatalf("r1 after its timer: %v, want fired by the new code", s)
	}
}

// TestUpgradeSIGKILL: a daemon moving a batch of waiting orders is
// SIGKILLed at a different point each round: k more events acknowledged
// after the upgrade request went out (k = 0 lands before its check ends,
// larger k later), or right after its answer. Every order is then on
// exactly one manifest, the old with its pin or the new without, with its
// state and intents as they were; an order is on the new one exactly when
// the journal holds its move record; the batch moved all or nothing (one
// append); `aosd replay --verify` reaches the live state. Each round then
// moves what is left, and the next pins every waiting order again with an
// apply --pin of the other version.
func TestUpgradeSIGKILL(t *testing.T) {
	t.Parallel()
	const orders = 16
	versions := []string{built.Path(t, "orders"), upgradeManifest(t, "orders", "orders_v2")}
	// The orders wait on their 15-minute expiry timers, set from the wall
	// clock at creation: on a host slow enough that the rounds outlast
	// that, the timers would fire mid-round and change what the rounds
	// compare. So a world whose orders are older than fresh gives way to a
	// new one, made on the version the round moves from (logged). On an
	// ordinary host every round moves the same orders back and forth.
	const fresh = 10 * time.Minute
	var w string
	var created time.Time
	newOrders := func(current int) {
		w, created = newWorld(t), time.Now()
		ok(t, w, "apply", versions[current])
		for i := range orders {
			ok(t, w, "send", orderCreated, fmt.Sprintf(`{"order_id":"o%02d","amount_cents":%d,"customer":"c"}`, i, 100+i))
		}
	}
	newOrders(0)
	hashes := []string{manifestHashOf(t, versions[0]), manifestHashOf(t, versions[1])}
	const afterAnswer = -1
	movedSome := false
	for round, k := range []int{0, 16, afterAnswer, 64} {
		if time.Since(created) > fresh {
			t.Logf("round %d: the orders are %s old, near their expiry: a new world", round, time.Since(created).Round(time.Second))
			newOrders(round % 2)
		}
		from, to := hashes[round%2], hashes[(round+1)%2]
		ok(t, w, "apply", versions[(round+1)%2], "--pin")
		before := map[string]cellRow{}
		for key, c := range cellRows(t, w) {
			if c.Pin == from {
				before[key] = c
			}
		}
		if len(before) < orders {
			t.Fatalf("round %d: %d orders pinned to %s, want at least %d", round, len(before), from, orders)
		}
		inflight := getStatus(t, w).Inflight
		height := getStatus(t, w).JournalHeight
		d := startKilledDaemon(t, w)
		tok := token(t, w)
		answered := make(chan int, 1)
		go func() {
			code, _ := postNoFail(d, tok, "/v1/upgrade", []byte(`{"workflow":"`+orderWF+`","all":true}`))
			answered <- code
		}()
		if k == afterAnswer {
			if code := <-answered; code != 200 {
				t.Fatalf("round %d: upgrade answered %d", round, code)
			}
		}
		for i := range max(k, 0) {
			body := fmt.Sprintf(`{"schema":%q,"value":{"order_id":"n%d-%d","amount_cents":1,"customer":"c"}}`, orderCreated, round, i)
			if code, _ := postNoFail(d, tok, "/v1/events", []byte(body)); code != 200 {
				t.Fatalf("round %d: event %d answered %d", round, i, code)
			}
		}
		syscall.Kill(d.cmd.Process.Pid, syscall.SIGKILL)
		d.cmd.Wait()
		if k != afterAnswer {
			<-answered
		}

		moved := map[string]bool{}
		for _, line := range strings.Split(strings.TrimSpace(ok(t, w, "journal", "--kind", "move", "--from", fmt.Sprint(height+1), "--json")), "\n") {
			if line == "" {
				continue
			}
			var r struct {
				Body struct {
					Key  string `json:"key"`
					From string `json:"from"`
					To   string `json:"to"`
				} `json:"body"`
			}
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatal(err)
			}
			if r.Body.From != from || r.Body.To != to || moved[r.Body.Key] || before[r.Body.Key].Pin != from {
				t.Fatalf("round %d: move record %s", round, line)
			}
			moved[r.Body.Key] = true
		}
		after := cellRows(t, w)
		for id, b := range before {
			c := after[id]
			want := from
			if moved[id] {
				want = ""
			}
			if c.Pin != want || c.StateHash != b.StateHash || c.Status != b.Status {
				t.Fatalf("round %d (kill %d): %s is %+v (moved: %v), before %+v", round, k, id, c, moved[id], b)
			}
		}
		if got := getStatus(t, w).Inflight; got != inflight+2*max(k, 0) {
			t.Fatalf("round %d (kill %d): %d intents in flight, want the %d before and two for each of the %d new orders", round, k, got, inflight, max(k, 0))
		}
		if len(moved) != 0 && len(moved) != len(before) {
			t.Fatalf("round %d (kill %d): %d of %d orders moved: a batch is one append", round, k, len(moved), len(before))
		}
		if k == afterAnswer && len(moved) != len(before) {
			t.Fatalf("round %d: the upgrade answered, but %d of %d orders moved", round, len(moved), len(before))
		}
		movedSome = movedSome || len(moved) > 0
		t.Logf("round %d: killed %s, %d of %d orders had moved", round, map[bool]string{true: "after the answer", false: fmt.Sprintf("after %d events", k)}[k == afterAnswer], len(moved), len(before))
		if r := aosd(t, w, "replay", "--verify"); r.code != 0 {
			t.Fatalf("round %d: replay --verify: exit %d\n%s%s", round, r.code, r.stdout, r.stderr)
		}
		up := upgradeJSON(t, w, 0, "upgrade", orderWF, "--all")
		if up.Counts.Moved != len(before)-len(moved) {
			t.Fatalf("round %d: the upgrade after the kill moved %d, want %d", round, up.Counts.Moved, len(before)-len(moved))
		}
	}
	if !movedSome {
		t.Fatal("no kill landed after a batch was journaled")
	}
}

// cellRow is a row of `aosd cells ls --json`.
type cellRow struct {
	StateHash string `json:"state_hash"`
	Status    string `json:"status"`
	Pin       string `json:"pin"`
}

// cellRows lists every order cell by key (as the JSON of its key).
func cellRows(t *testing.T, w string) map[string]cellRow {
	t.Helper()
	var page struct {
		Cells []struct {
			Key json.RawMessage `json:"key"`
			cellRow
		} `json:"cells"`
	}
	jsonOut(t, w, &page, "cells", "ls", orderWF, "--all")
	out := map[string]cellRow{}
	for _, c := range page.Cells {
		var k string
		if err := json.Unmarshal(c.Key, &k); err != nil {
			t.Fatal(err)
		}
		out[k] = c.cellRow
	}
	return out
}

// postNoFail posts like post, but a failed connection (a killed daemon)
// is code 0 rather than a test failure.
func postNoFail(d *daemon, tok, path string, body []byte) (int, []byte) {
	req, _ := http.NewRequest("POST", "http://"+d.addr+path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	b.ReadFrom(resp.Body)
	return resp.StatusCode, b.Bytes()
}
