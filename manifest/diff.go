package manifest

import "sort"

// Changes is what changes between two manifests, for `aosd apply` to show.
// Def names are sorted; subscriptions keep their order in the manifest they
// come from.
type Changes struct {
	OldHash              string         `json:"old_hash"` // "" for a nil manifest
	NewHash              string         `json:"new_hash"`
	NameChanged          bool           `json:"name_changed"`
	Added                []string       `json:"added"`   // defs (user and built-in) only in the new manifest
	Removed              []string       `json:"removed"` // defs only in the old manifest
	Changed              []string       `json:"changed"` // defs in both whose hash differs
	SubscriptionsAdded   []Subscription `json:"subscriptions_added"`
	SubscriptionsRemoved []Subscription `json:"subscriptions_removed"`
}

// Empty reports whether the two manifests are the same world.
func (d Changes) Empty() bool {
	return d.OldHash == d.NewHash
}

// Diff compares two manifests def by def (over Manifest.Defs, the
// list the hash covers) and subscription by subscription. A nil old manifest
// means everything in new is added; a nil new one, everything removed.
func Diff(old, new *Manifest) Changes {
	var d Changes
	oldDefs, newDefs := map[string]DefRef{}, map[string]DefRef{}
	var oldSubs, newSubs []Subscription
	if old != nil {
		d.OldHash = old.Hash.String()
		for _, r := range old.Defs {
			oldDefs[r.Name] = r
		}
		oldSubs = old.Routing.Subscriptions
	}
	if new != nil {
		d.NewHash = new.Hash.String()
		for _, r := range new.Defs {
			newDefs[r.Name] = r
		}
		newSubs = new.Routing.Subscriptions
	}
	d.NameChanged = old != nil && new != nil && old.Name != new.Name
	for name, n := range newDefs {
		o, ok := oldDefs[name]
		switch {
		case !ok:
			d.Added = append(d.Added, name)
		case o.Hash != n.Hash || o.Kind != n.Kind:
			d.Changed = append(d.Changed, name)
		}
	}
	for name := range oldDefs {
		if _, ok := newDefs[name]; !ok {
			d.Removed = append(d.Removed, name)
		}
	}
	sort.Strings(d.Added)
	sort.Strings(d.Removed)
	sort.Strings(d.Changed)
	d.SubscriptionsAdded = subtractSubs(newSubs, oldSubs)
	d.SubscriptionsRemoved = subtractSubs(oldSubs, newSubs)
	return d
}

// subtractSubs returns the subscriptions of a not matched by one in b,
// counting duplicates as a multiset.
func subtractSubs(a, b []Subscription) []Subscription {
	left := map[Subscription]int{}
	for _, s := range b {
		left[s]++
	}
	var out []Subscription
	for _, s := range a {
		if left[s] > 0 {
			left[s]--
			continue
		}
		out = append(out, s)
	}
	return out
}
