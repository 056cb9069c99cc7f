package api

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"

	"github.com/aos-kernel/aos/internal/jsonx"
	"github.com/aos-kernel/aos/receipts"
	"github.com/aos-kernel/aos/views"
)

// ParseTrustedKeys reads a trust set to verify against from either form a
// user has at hand: the JSON array `aosd keys ls --json` prints and GET
// /v1/keys answers ([{"name", "id", "public_key" (PEM), "effects"}]), or
// the world's executors.json ({"keys": [{"name", "key_id", "public_key"
// (base64), "effects"}]}). Duplicate or unknown fields, a key whose id is
// not its public key's, and effects the keyring refuses are errors naming
// the entry. A key listed without effects (written before keys had
// effects) verifies nothing, as it settles nothing.
func ParseTrustedKeys(data []byte) (*receipts.Keyring, error) {
	if _, _, err := jsonx.Parse(data, jsonx.Options{}); err != nil {
		return nil, fmt.Errorf("keys: %v", err)
	}
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '[' {
		kr := receipts.NewKeyring()
		if err := kr.UnmarshalJSON(data); err != nil {
			return nil, fmt.Errorf("keys (an executors.json): %w", err)
		}
		return kr, nil
	}
	var kvs []KeyView
	if err := views.Decode(data, &kvs); err != nil {
		return nil, fmt.Errorf("keys (as aosd keys ls --json prints them): %v", err)
	}
	type entry struct {
		Name      string   `json:"name"`
		KeyID     string   `json:"key_id"`
		PublicKey string   `json:"public_key"`
		Effects   []string `json:"effects,omitempty"`
	}
	file := struct {
		Keys []entry `json:"keys"`
	}{Keys: []entry{}}
	for i, kv := range kvs {
		pub, err := receipts.DecodePublicKey([]byte(kv.PublicKey))
		if err != nil {
			return nil, fmt.Errorf("keys: /%d/public_key: %w", i, err)
		}
		if id := receipts.KeyID(pub); kv.ID != "" && kv.ID != id {
			return nil, fmt.Errorf("keys: /%d/id: %s is not the id of its public_key (%s)", i, kv.ID, id)
		}
		file.Keys = append(file.Keys, entry{Name: kv.Name, KeyID: kv.ID, PublicKey: base64.StdEncoding.EncodeToString(pub), Effects: kv.Effects})
	}
	js, err := json.Marshal(&file)
	if err != nil {
		return nil, err
	}
	kr := receipts.NewKeyring()
	if err := kr.UnmarshalJSON(js); err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	return kr, nil
}
