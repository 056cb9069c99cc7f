package snapshot

import (
	"bytes"
	"fmt"

	"github.com/aos-kernel/aos/schemas"
)

// Diff names the first part where a and b differ, in field order ("" when
// they are equal): the field, and for a list the first differing element
// by its identity (workflow name, instance, intent hash, position), with
// both values' hashes. It is what `aosd replay --verify` reports when two
// replays reach different states.
func Diff(a, b *State) string {
	if a.Height != b.Height {
		return fmt.Sprintf("height: %d vs %d", a.Height, b.Height)
	}
	if a.Logical != b.Logical {
		return fmt.Sprintf("logical time: %d vs %d", a.Logical, b.Logical)
	}
	if d := diffValue("manifest", a.Manifest, b.Manifest); d != "" {
		return d
	}
	if d := diffValue("limits", a.Limits, b.Limits); d != "" {
		return d
	}
	if d := diffList("workflow", a.Workflows, b.Workflows, func(w Workflow) string { return w.Name }); d != "" {
		return d
	}
	if d := diffList("instance", a.Instances, b.Instances, func(in Instance) string {
		return fmt.Sprintf("%s key %x", in.Workflow, in.Key)
	}); d != "" {
		return d
	}
	if d := diffList("intent in flight", a.Intents, b.Intents, func(it Intent) string { return it.Intent.Hash.String() }); d != "" {
		return d
	}
	if d := diffList("settled intent", a.Settled, b.Settled, func(st Settled) string { return st.Intent.String() }); d != "" {
		return d
	}
	if d := diffList("idempotency key", a.Idempotency, b.Idempotency, func(e Idem) string { return fmt.Sprintf("%x (seq %d)", e.Key, e.Seq) }); d != "" {
		return d
	}
	if d := diffValue("state-schema epochs", a.Epochs, b.Epochs); d != "" {
		return d
	}
	if d := diffList("live manifest", a.Live, b.Live, func(m LiveManifest) string { return m.Hash.String() }); d != "" {
		return d
	}
	return diffList("module set aside", a.Aside, b.Aside, func(m Aside) string { return m.Module })
}

func diffValue(what string, a, b any) string {
	ea, eb := schemas.MustMarshal(a), schemas.MustMarshal(b)
	if bytes.Equal(ea, eb) {
		return ""
	}
	return fmt.Sprintf("%s: %s vs %s", what, schemas.HashBytes(ea).Short(), schemas.HashBytes(eb).Short())
}

func diffList[T any](what string, a, b []T, name func(T) string) string {
	for i := 0; i < len(a) && i < len(b); i++ {
		if d := diffValue(what+" "+name(a[i]), a[i], b[i]); d != "" {
			if na, nb := name(a[i]), name(b[i]); na != nb {
				return fmt.Sprintf("%s %d: %s vs %s", what, i, na, nb)
			}
			return d
		}
	}
	switch {
	case len(a) > len(b):
		return fmt.Sprintf("%s %s: only in the first", what, name(a[len(b)]))
	case len(b) > len(a):
		return fmt.Sprintf("%s %s: only in the second", what, name(b[len(a)]))
	}
	return ""
}
