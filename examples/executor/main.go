// Command executor is an example external executor: a stand-in payment
// service for examples/manifests/orders that speaks the executor protocol
// of docs/API.md over HTTP. It is deliberately small so it reads as a
// recipe for writing one in any language:
//
//  1. make an ed25519 key and have the world trust its public half
//     for the effects it serves
//     (`aosd keys add payments payments.pub.pem --effects com.example/payment.charge@1`);
//  2. long-poll POST /v1/effects/claim for the effects it serves (the
//     answer names the world's identity beside the intents);
//  3. do the work, idempotently per intent hash;
//  4. POST /v1/receipts with a receipt for that world, signed over its
//     canonical CBOR body.
//
// Usage (with `aosd serve --world /tmp/w` running):
//
//	go run ./examples/executor --world /tmp/w --key /tmp/payments.key
//
// The first run creates the key files and prints the `aosd keys add`
// command to trust them. Charges above --decline-over cents are declined.
package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

func main() {
	world := flag.String("world", ".aos", "world directory (reads daemon.json and token)")
	keyFile := flag.String("key", "payments.key", "private key file (PKCS#8 PEM); created with KEY.pub.pem if missing")
	name := flag.String("name", "payments", "executor name the key is trusted under")
	effect := flag.String("effect", "com.example/payment.charge@1", "effect to serve")
	declineOver := flag.Int64("decline-over", 100_000, "decline charges above this many cents")
	once := flag.Bool("once", false, "exit after the first batch of claimed intents")
	flag.Parse()
	log.SetFlags(0)

	priv, created, err := loadOrCreateKey(*keyFile)
	if err != nil {
		log.Fatal(err)
	}
	if created {
		fmt.Printf("created %s and %s.pub.pem; trust it with:\n  aosd keys add %s %s.pub.pem --effects %s --world %s\n",
			*keyFile, *keyFile, *name, *keyFile, *effect, *world)
		return
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	c, err := connect(*world)
	if err != nil {
		log.Fatal(err)
	}
	for ctx.Err() == nil {
		n, err := serveBatch(ctx, c, priv, *name, *effect, *declineOver)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			log.Printf("executor: %v (retrying in 1s)", err)
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		if *once && n > 0 {
			return
		}
	}
}

// client talks to one daemon with its bearer token.
type client struct{ base, token string }

func connect(world string) (*client, error) {
	var info struct {
		Addr string `json:"addr"`
	}
	b, err := os.ReadFile(filepath.Join(world, "daemon.json"))
	if err != nil {
		return nil, fmt.Errorf("no daemon for %s (start `aosd serve --world %s`): %w", world, world, err)
	}
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("%s/daemon.json: %w", world, err)
	}
	tok, err := os.ReadFile(filepath.Join(world, "token"))
	if err != nil {
		return nil, err
	}
	return &client{base: "http://" + info.Addr, token: strings.TrimSpace(string(tok))}, nil
}

func (c *client) post(ctx context.Context, path string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.base+path, bytes.NewReader(body))
	if err != nil {
		return 0, nil, err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	return resp.StatusCode, out, err
}

type claimed struct {
	Hash   string `json:"hash"`
	Effect string `json:"effect"`
	Params struct {
		OrderID     string `json:"order_id"`
		AmountCents int64  `json:"amount_cents"`
	} `json:"params"`
}

// serveBatch claims up to 16 intents (waiting up to 20 s for work), charges
// each and posts its signed receipt. It returns how many it settled.
func serveBatch(ctx context.Context, c *client, priv ed25519.PrivateKey, name, effect string, declineOver int64) (int, error) {
	req, _ := json.Marshal(map[string]any{"executor": name, "effects": []string{effect}, "max": 16, "lease_ms": 30_000, "wait_ms": 20_000})
	code, body, err := c.post(ctx, "/v1/effects/claim", req)
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("claim: HTTP %d: %s", code, body)
	}
	var resp struct {
		World   string // the world's identity: every receipt names it
		Intents []claimed
	}
	if err := json.Unmarshal(body, &resp); err != nil {
		return 0, fmt.Errorf("claim response: %w", err)
	}
	for _, it := range resp.Intents {
		if err := settle(ctx, c, priv, name, resp.World, it, declineOver); err != nil {
			return 0, err
		}
	}
	return len(resp.Intents), nil
}

func settle(ctx context.Context, c *client, priv ed25519.PrivateKey, name, world string, it claimed, declineOver int64) error {
	h, err := schemas.ParseHash(it.Hash)
	if err != nil {
		return err
	}
	// The intent hash is stable across redeliveries and unique to its world
	// (it binds the world's identity), so it doubles as the idempotency key
	// a real payment API would take.
	outcome := "succeeded"
	if it.Params.AmountCents > declineOver {
		outcome = "declined"
	}
	payload, err := schemas.Marshal(map[string]any{"charge_id": "ch_" + h.Short(), "status": outcome})
	if err != nil {
		return err
	}
	sr := receipts.Sign(priv, receipts.Receipt{World: world, Intent: h, Effect: it.Effect, Executor: name,
		Status: receipts.StatusOK, Payload: payload, Attempt: 1})
	js, err := receipts.ToJSON(sr)
	if err != nil {
		return err
	}
	code, body, err := c.post(ctx, "/v1/receipts", js)
	switch {
	case err != nil:
		return err
	case code == http.StatusOK:
		log.Printf("executor: order %s: %d cents %s (intent %s)", it.Params.OrderID, it.Params.AmountCents, outcome, it.Hash)
	case code == http.StatusConflict:
		// Settled already (a redelivery after an expired lease: 409
		// duplicate), or the intent's cell failed meanwhile (409 dropped):
		// nothing to do.
		log.Printf("executor: intent %s already settled: %s", it.Hash, body)
	default:
		return fmt.Errorf("receipt for %s: HTTP %d: %s", it.Hash, code, body)
	}
	return nil
}

func loadOrCreateKey(path string) (ed25519.PrivateKey, bool, error) {
	priv, err := receipts.ReadPrivateKeyFile(path)
	if err == nil {
		return priv, false, nil
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, false, err
	}
	if priv, err = receipts.GenerateKey(); err != nil {
		return nil, false, err
	}
	if err := receipts.WritePrivateKeyFile(path, priv); err != nil {
		return nil, false, err
	}
	if err := receipts.WritePublicKeyFile(path+".pub.pem", priv.Public().(ed25519.PublicKey)); err != nil {
		return nil, false, err
	}
	return priv, true, nil
}
