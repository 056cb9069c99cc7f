package api_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/receipts"
)

// TestParseTrustedKeys: both forms of a trust set read to the same keys;
// a key id that is not its key's is refused naming the entry.
func TestParseTrustedKeys(t *testing.T) {
	s := serveWorld(t, false)
	code, body := s.do(t, "GET", "/v1/keys", "")
	if code != 200 {
		t.Fatalf("keys: %d %s", code, body)
	}
	kr, err := api.ParseTrustedKeys([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var listed []api.KeyView
	if err := json.Unmarshal([]byte(body), &listed); err != nil {
		t.Fatal(err)
	}
	fileForm, err := kr.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	kr2, err := api.ParseTrustedKeys(fileForm)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := kr.MarshalCBOR()
	b, _ := kr2.MarshalCBOR()
	if len(listed) != 1 || !bytes.Equal(a, b) {
		t.Fatalf("the two forms read differently: %x vs %x", a, b)
	}
	other, _ := receipts.GenerateKey()
	bad := listed
	bad[0].ID = receipts.KeyID(other.Public().(ed25519.PublicKey))
	js, _ := json.Marshal(bad)
	if _, err := api.ParseTrustedKeys(js); err == nil || !strings.Contains(err.Error(), "/0/id: "+bad[0].ID+" is not the id of its public_key") {
		t.Fatalf("wrong id: %v", err)
	}
	for _, in := range []string{`[{"name":"x","pem":"y"}]`, `[{"name":"x","name":"y"}]`, `{"keys":[{"name":"x","public_key":"!"}]}`} {
		if _, err := api.ParseTrustedKeys([]byte(in)); err == nil {
			t.Errorf("ParseTrustedKeys(%s) accepted", in)
		}
	}
}
