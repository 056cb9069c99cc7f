// Command embed runs an aos world inside a Go program: a native workflow
// written with the SDK, the world's manifest applied, events in through the
// Go API and through the HTTP API, the cell's state out. docs/embedding.md
// walks through it.
//
//	go run ./examples/embed --world /tmp/embedded
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/aos-kernel/aos"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/sdk"
)

// Tally is the workflow module: a running count per key. The manifest's
// builtin def names it ("acme/tally") and pins its identity.
var Tally = sdk.NewModule("acme/tally")

// Identity is Tally's code identity. Change the code, change the identity
// (and the manifest that pins it), so the manifest hash says which code ran.
const Identity = "acme/tally@1"

// State is com.acme/Tally@1.
type State struct {
	Count int64 `cbor:"count"`
}

// Add is com.acme/Add@1.
type Add struct {
	Key string `cbor:"key"`
	By  int64  `cbor:"by"`
}

func init() {
	sdk.Workflow(Tally, "step", func(c *sdk.Ctx, st *State, ev Add) (*State, error) {
		if st == nil {
			st = &State{}
		}
		return &State{Count: st.Count + ev.By}, nil
	})
}

func main() {
	world := flag.String("world", filepath.Join(os.TempDir(), "aos-embed"), "world directory (created if missing)")
	manifest := flag.String("manifest", filepath.Join("examples", "embed", "manifest"), "manifest directory")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, *world, *manifest, os.Stdout); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, dir, manifest string, out io.Writer) error {
	w, err := aos.Open(ctx, dir, aos.Options{
		Modules: []modules.Builtin{Tally.Builtin(Identity)},
		Listen:  "127.0.0.1:0", // the HTTP API on a free loopback port
	})
	if err != nil {
		return err
	}
	defer w.Close()

	// Apply is refused unless the world is quiescent; a world reopened with
	// the same manifest reports it unchanged.
	res, err := w.Apply(ctx, manifest, false)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "manifest %s %s\n", res.ManifestName, res.ManifestHash)

	// An event through the Go API...
	seq, err := w.Send(ctx, "com.acme/Add@1", json.RawMessage(`{"key":"a","by":2}`))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "event journaled at seq %d\n", seq)

	// ...and one through the HTTP API, as any other client sends it
	// (docs/API.md; `aosd` commands on this world directory go there too).
	if _, err := api(ctx, w, "POST", "/v1/events", `{"schema":"com.acme/Add@1","value":{"key":"a","by":40}}`); err != nil {
		return err
	}

	// Wait until every step has run, then read the cell.
	if err := w.Kernel().WaitQuiescent(ctx); err != nil {
		return err
	}
	cell, err := w.Cell(ctx, "com.acme/tally.step@1", "a")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "cell a: %s %s\n", cell.Status, cell.State)

	// The same cell over HTTP: GET /v1/cells/{workflow}/{key}.
	body, err := api(ctx, w, "GET", "/v1/cells/"+url.PathEscape("com.acme/tally.step@1")+"/a", "")
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "GET /v1/cells/…/a: %s", body)
	return w.Close()
}

// api calls the world's HTTP API with its bearer token.
func api(ctx context.Context, w *aos.World, method, path, body string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, "http://"+w.Addr()+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+w.Token())
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s %s: %s %s", method, path, resp.Status, b)
	}
	return b, nil
}
