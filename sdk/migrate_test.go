package sdk_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/sdk"
)

type oldOrder struct {
	N int64 `cbor:"n"`
}

type newOrder struct {
	N int64 `cbor:"n"`
	M int64 `cbor:"m"`
}

// TestMigration: a migration gets the old state (the input's event) decoded
// and the name of the schema it validated against, and returns the new
// state canonically encoded, with nothing emitted; an error, a panic, a nil
// result or an old state that does not decode is a fault naming it.
func TestMigration(t *testing.T) {
	m := sdk.NewModule("test/migrate")
	sdk.Migration(m, "migrate", func(from string, old *oldOrder) (*newOrder, error) {
		switch {
		case from != "t/Old@1":
			return nil, errors.New("from " + from)
		case old.N < 0:
			return nil, errors.New("negative")
		case old.N == 0:
			return nil, nil
		case old.N > 100:
			panic("too big")
		}
		return &newOrder{N: old.N, M: 2 * old.N}, nil
	})
	fn := m.Builtin("test/migrate@1").Entrypoints["migrate"]
	run := func(from string, v any) (*modules.Output, error) {
		return fn(&modules.Input{Version: 1, Event: modules.EventIn{Schema: from, Value: schemas.MustMarshal(v)}})
	}
	out, err := run("t/Old@1", map[string]any{"n": 3})
	if err != nil {
		t.Fatal(err)
	}
	if string(out.State) != string(schemas.MustMarshal(map[string]any{"n": 3, "m": 6})) || len(out.Effects)+len(out.DomainEvents)+len(out.Ann) != 0 {
		t.Fatalf("migrated %x, %+v", out.State, out)
	}
	for _, tc := range []struct {
		from string
		v    any
		want string
	}{
		{"t/Other@1", map[string]any{"n": 3}, "migration returned an error: from t/Other@1"},
		{"t/Old@1", map[string]any{"n": -1}, "migration returned an error: negative"},
		{"t/Old@1", map[string]any{"n": 0}, "migration returned no state"},
		{"t/Old@1", map[string]any{"n": 101}, "panicked: too big"},
		{"t/Old@1", map[string]any{"n": "three"}, "old state (t/Old@1) does not decode"},
	} {
		_, err := run(tc.from, tc.v)
		var f modules.Fault
		if !errors.As(err, &f) || !strings.Contains(string(f), tc.want) {
			t.Errorf("%s %v: %v, want a fault with %q", tc.from, tc.v, err, tc.want)
		}
	}
}
