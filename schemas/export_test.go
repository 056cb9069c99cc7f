package schemas

// Hooks for the differential tests and benchmarks of Validate's fast path.

// HasFastPlan reports whether schema name has a fast plan.
func HasFastPlan(r *Registry, name string) bool {
	c := r.state.Load().defs[name]
	return c != nil && c.fast != nil
}

// FastValid reports whether the fast path alone calls data valid for name.
func FastValid(r *Registry, name string, data []byte) bool {
	c := r.state.Load().defs[name]
	return c != nil && c.fast != nil && c.fast.accepts(data)
}

// ValidateSlow is Validate without the fast path.
func ValidateSlow(r *Registry, name string, data []byte) error {
	st, c, err := r.lookup(name)
	if err != nil {
		return err
	}
	return st.validate(c, data)
}

// FromJSONSlow is FromJSON without the fast path.
func FromJSONSlow(r *Registry, name string, js []byte) ([]byte, error) {
	st, c, err := r.lookup(name)
	if err != nil {
		return nil, err
	}
	v, err := DecodeJSON(js)
	if err != nil {
		return r.FromJSON(name, js) // the same parse error
	}
	return st.fromValueSlow(c, v)
}

// FastFromJSON reports whether FromJSON's fast path alone converts js.
func FastFromJSON(r *Registry, name string, js []byte) bool {
	st, c, err := r.lookup(name)
	if err != nil {
		return false
	}
	v, err := DecodeJSON(js)
	if err != nil {
		return false
	}
	_, ok := st.fastFromValue(c, v)
	return ok
}

// ValidCached reports whether Validate remembers data as valid for name.
func ValidCached(r *Registry, name string, data []byte) bool {
	c := r.state.Load().defs[name]
	if c == nil {
		return false
	}
	_, ok := c.valid.Peek(HashBytes(data))
	return ok
}
