//go:build !wasip1

package sdk

// Export makes m the module a wasm build exports; it works only in a
// GOOS=wasip1 build. Natively, register m.Builtin(identity) with a
// modules.Builtins instead.
func Export(m *Module) {
	panic("sdk: Export is for GOOS=wasip1 builds; natively, add " + m.name + "'s Builtin(identity) to a modules.Builtins")
}
