package schemas

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math/big"
	"strconv"

	"github.com/aos-kernel/aos/internal/walk"
)

// decodeJSONModel decodes canonical CBOR for validation.
func decodeJSONModel(data []byte) (any, error) {
	return Decode(data)
}

// ToJSONValue decodes canonical CBOR into a JSON value for display: maps
// become map[string]any, byte strings standard base64 text, every number a
// json.Number (integers exact, floats in shortest round-trip form). Maps with
// non-text keys and non-finite floats have no JSON form and are errors.
func ToJSONValue(data []byte) (any, error) {
	v, err := Decode(data)
	if err != nil {
		return nil, err
	}
	return displayValue(v, nil)
}

// ToJSON renders canonical CBOR as compact JSON with object keys sorted. For
// values FromJSON produced, FromJSON(ToJSON(b)) == b.
func ToJSON(data []byte) ([]byte, error) {
	v, err := ToJSONValue(data)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("render json: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// displayValue is v with every leaf in its JSON form.
func displayValue(v any, path []string) (any, error) {
	out, _, err := walk.Map(v, path, false, displayLeaf)
	return out, err
}

func displayLeaf(v any, path []string) (any, bool, error) {
	switch t := v.(type) {
	case nil, bool, string, map[string]any, []any:
		return nil, false, nil
	case []byte:
		return base64.StdEncoding.EncodeToString(t), true, nil
	case uint64:
		return json.Number(strconv.FormatUint(t, 10)), true, nil
	case int64:
		return json.Number(strconv.FormatInt(t, 10)), true, nil
	case big.Int:
		return json.Number(t.String()), true, nil
	case float64:
		if !floatOK(t) {
			return nil, false, fmt.Errorf("at %s: %v has no JSON form", pointer(path), t)
		}
		return json.Number(strconv.FormatFloat(t, 'g', -1, 64)), true, nil
	case map[any]any:
		return nil, false, fmt.Errorf("at %s: map with non-text keys has no JSON form", pointer(path))
	}
	return nil, false, fmt.Errorf("at %s: %T has no JSON form", pointer(path), v)
}
