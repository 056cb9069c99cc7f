package receipts_test

import (
	"context"
	"crypto/ed25519"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/schemas"
)

// Executors sign with whatever Ed25519 library their language has; the
// world must accept those signatures and produce the same ones itself.
func TestSignMatchesStandardLibrary(t *testing.T) {
	for i := range 20 {
		priv := testKey(fmt.Sprint("std-", i))
		r := sampleReceipt()
		r.Attempt = uint64(i + 1)
		r.Payload = schemas.MustMarshal(map[string]any{"n": uint64(i), "pad": strings.Repeat("x", i*13)})
		ours := receipts.Sign(priv, r)
		std := ed25519.Sign(priv, receipts.SigningMessage(&r))
		if hex.EncodeToString(ours.Signature) != hex.EncodeToString(std) {
			t.Fatalf("receipt %d: signature differs from crypto/ed25519's", i)
		}
		if !ed25519.Verify(pub(priv), receipts.SigningMessage(&r), ours.Signature) {
			t.Fatalf("receipt %d: crypto/ed25519 does not verify our signature", i)
		}
		k := ring(t, "timer", priv)
		if _, err := k.Verify(receipts.SignedReceipt{Receipt: r, KeyID: receipts.KeyID(pub(priv)), Signature: std}); err != nil {
			t.Fatalf("receipt %d: a crypto/ed25519 signature is refused: %v", i, err)
		}
	}
}

func mustHex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		panic(err)
	}
	return b
}

// A key no honest signer can have is refused when it is trusted, with the
// reason, and the keyring is unchanged.
func TestWeakKeysRefused(t *testing.T) {
	small := map[string]string{
		"identity":         "0100000000000000000000000000000000000000000000000000000000000000",
		"order 2":          "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
		"order 4":          "0000000000000000000000000000000000000000000000000000000000000000",
		"order 4, negated": "0000000000000000000000000000000000000000000000000000000000000080",
		"order 8":          "26e8958fc2b227b045c3f489f2ef98f0d5dfac05d3c63339b13802886d53fc05",
		"order 8, other":   "c7176a703d4dd84fba3c0b760d10670f2a2053fa2c39ccc64ec7fd7792ac037a",
	}
	k := ring(t, "timer", testKey("a"))
	for name, h := range small {
		err := k.Add("evil", mustHex(h), testEffects)
		if !errors.Is(err, receipts.ErrBadKeyring) || !strings.Contains(err.Error(), "small order") && !strings.Contains(err.Error(), "canonical") {
			t.Errorf("%s: %v", name, err)
		}
	}
	// y = p + d for small d: non-canonical encodings of small y. Those that
	// are points must be refused as non-canonical (or small order).
	nonCanonical, offCurve := 0, 0
	for d := 2; d <= 18; d++ {
		b := mustHex("edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f")
		b[0] += byte(d)
		err := k.Add("evil", b, testEffects)
		switch {
		case err == nil:
			t.Fatalf("y = p+%d accepted", d)
		case strings.Contains(err.Error(), "not a point on the curve"):
			offCurve++
		case strings.Contains(err.Error(), "not in canonical form"):
			nonCanonical++
		case !strings.Contains(err.Error(), "small order"):
			t.Fatalf("y = p+%d: %v", d, err)
		}
	}
	if nonCanonical == 0 || offCurve == 0 {
		t.Fatalf("non-canonical refusals %d, off-curve refusals %d: want both", nonCanonical, offCurve)
	}
	if k.Len() != 1 {
		t.Fatalf("keyring has %d keys after refusals, want 1", k.Len())
	}
}

// mixedBatch is receipts each with a different fate: valid from two keys,
// forged, unknown signer, wrong executor name, tampered body, malformed,
// an effect the key is not allowed.
func mixedBatch(t *testing.T) (*receipts.Keyring, []receipts.SignedReceipt) {
	a, b, stranger := testKey("a"), testKey("b"), testKey("stranger")
	k := ring(t, "timer", a, "http", b)
	var out []receipts.SignedReceipt
	for i := range 40 {
		r := sampleReceipt()
		r.Intent = schemas.HashBytes([]byte(fmt.Sprint("intent-", i)))
		signer := a
		if i%2 == 1 {
			r.Executor, r.Effect, signer = "http", "com.test/http.request@1", b
		}
		sr := receipts.Sign(signer, r)
		switch i {
		case 3:
			sr.Signature[5] ^= 1 // forged
		case 7:
			sr = receipts.Sign(stranger, r) // unknown signer
		case 11:
			r.Executor = "timer" // b's key, a's executor name
			sr = receipts.Sign(b, r)
		case 17:
			sr.Attempt++ // body changed after signing
		case 23:
			sr.Signature = sr.Signature[:10] // malformed
		case 29:
			r.Payload = []byte{0xa1, 0x61} // truncated CBOR, signed
			sr = receipts.Sign(a, r)
		case 31:
			r.Effect = "org.other/charge@1" // an effect b's key is not allowed
			sr = receipts.Sign(b, r)
		}
		out = append(out, sr)
	}
	return k, out
}

func TestVerifyBatchMatchesVerify(t *testing.T) {
	k, srs := mixedBatch(t)
	check := func(t *testing.T, srs []receipts.SignedReceipt) {
		got := k.VerifyBatch(srs)
		if len(got) != len(srs) {
			t.Fatalf("%d verdicts for %d receipts", len(got), len(srs))
		}
		for i, sr := range srs {
			name, err := k.Verify(sr)
			if got[i].Executor != name || fmt.Sprint(got[i].Err) != fmt.Sprint(err) {
				t.Fatalf("receipt %d: batch says (%q, %v), alone (%q, %v)", i, got[i].Executor, got[i].Err, name, err)
			}
		}
	}
	check(t, srs)
	refused := 0
	for _, v := range k.VerifyBatch(srs) {
		if v.Err != nil {
			refused++
		}
	}
	if refused != 7 {
		t.Fatalf("%d refused, want the 7 bad ones", refused)
	}
	if v := k.VerifyBatch(srs)[31]; !errors.Is(v.Err, receipts.ErrEffectNotAllowed) {
		t.Fatalf("receipt for an effect its key is not allowed: %v", v.Err)
	}
	var good []receipts.SignedReceipt
	for i, sr := range srs {
		if i != 3 && i != 7 && i != 11 && i != 17 && i != 23 && i != 29 && i != 31 {
			good = append(good, sr)
		}
	}
	check(t, good)                                      // all valid: the batch equation alone decides
	check(t, srs[3:4])                                  // one forged
	check(t, nil)                                       // empty
	check(t, []receipts.SignedReceipt{srs[7], srs[23]}) // nothing reaches the signature check
}

// Concurrent callers get the verdict Verify would give, whether their
// receipt was batched, alone, or verified after Close.
func TestVerifierConcurrent(t *testing.T) {
	k, srs := mixedBatch(t)
	v := receipts.NewVerifier(k, 0)
	var wg sync.WaitGroup
	errs := make(chan error, 8*len(srs))
	for round := range 8 {
		for i := range srs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				name, err := v.Verify(context.Background(), &srs[i])
				wname, werr := k.Verify(srs[i])
				if name != wname || fmt.Sprint(err) != fmt.Sprint(werr) {
					errs <- fmt.Errorf("round %d receipt %d: (%q, %v), want (%q, %v)", round, i, name, err, wname, werr)
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	batches, n := v.Stats()
	if n != uint64(8*len(srs)) || batches == 0 || batches > n {
		t.Fatalf("stats: %d batches holding %d receipts, want %d receipts", batches, n, 8*len(srs))
	}
	v.Close()
	if name, err := v.Verify(context.Background(), &srs[0]); err != nil || name != "timer" {
		t.Fatalf("after Close: %q %v", name, err)
	}
	if _, err := v.Verify(context.Background(), &srs[3]); !errors.Is(err, receipts.ErrBadSignature) {
		t.Fatalf("forged after Close: %v", err)
	}
}
