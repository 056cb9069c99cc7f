package walk_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/internal/walk"
)

func tree() map[string]any {
	return map[string]any{
		"b": []any{"x", 1, map[string]any{"c": 2}},
		"a": map[string]any{"s": "text"},
		"z": nil,
	}
}

// double replaces every int by twice it.
func double(v any, _ []string) (any, bool, error) {
	if n, ok := v.(int); ok {
		return 2 * n, true, nil
	}
	return nil, false, nil
}

func TestMapCopiesOnlyWhatChanges(t *testing.T) {
	in := tree()
	out, changed, err := walk.Map(in, nil, true, double)
	if err != nil || !changed {
		t.Fatalf("Map = %v, %v", changed, err)
	}
	if !reflect.DeepEqual(in, tree()) {
		t.Fatalf("Map modified its input: %v", in)
	}
	want := tree()
	want["b"] = []any{"x", 2, map[string]any{"c": 4}}
	if !reflect.DeepEqual(out, want) {
		t.Fatalf("Map = %v, want %v", out, want)
	}
	om := out.(map[string]any)
	if reflect.ValueOf(om["a"]).Pointer() != reflect.ValueOf(in["a"]).Pointer() {
		t.Error("an unchanged member was copied")
	}
	same, changed, err := walk.Map(in["a"], nil, false, double)
	if err != nil || changed || reflect.ValueOf(same).Pointer() != reflect.ValueOf(in["a"]).Pointer() {
		t.Errorf("an unchanged tree came back changed=%v err=%v", changed, err)
	}
}

func TestMapVisitsParentsFirstInKeyOrder(t *testing.T) {
	var seen []string
	_, _, err := walk.Map(tree(), []string{"root"}, true, func(v any, path []string) (any, bool, error) {
		seen = append(seen, "/"+strings.Join(path, "/"))
		return nil, false, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"/root", "/root/a", "/root/a/s", "/root/b", "/root/b/0", "/root/b/1", "/root/b/2", "/root/b/2/c", "/root/z"}
	if !reflect.DeepEqual(seen, want) {
		t.Fatalf("visited %v, want %v", seen, want)
	}
}

func TestMapStopsAtTheFirstError(t *testing.T) {
	stop := errors.New("stop")
	var at []string
	_, _, err := walk.Map(tree(), nil, true, func(v any, path []string) (any, bool, error) {
		if _, ok := v.(int); ok {
			at = append([]string(nil), path...)
			return nil, false, stop
		}
		return nil, false, nil
	})
	if err != stop || !reflect.DeepEqual(at, []string{"b", "1"}) {
		t.Fatalf("Map = %v at %v, want stop at [b 1]", err, at)
	}
}
