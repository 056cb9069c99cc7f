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
