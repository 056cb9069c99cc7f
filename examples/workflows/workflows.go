package workflows

import (
	"github.com/aos-kernel/aos/examples/workflows/choreography"
	"github.com/aos-kernel/aos/examples/workflows/counter"
	"github.com/aos-kernel/aos/examples/workflows/notes"
	"github.com/aos-kernel/aos/examples/workflows/orders"
	"github.com/aos-kernel/aos/examples/workflows/reminders"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/sdk"
)

// Modules lists every example module, in a fixed order.
func Modules() []*sdk.Module {
	return []*sdk.Module{counter.Module, orders.Module, notes.Module, reminders.Module, choreography.Module}
}

// CodeVersion is the examples' native code version. Bump it whenever an
// example's behaviour changes, so the identity their builtin defs declare
// (and with it every manifest hash) changes too.
const CodeVersion = "3"

// Identity is the code identity an example module declares natively when
// Register is given no other: "<module>@go<CodeVersion>", e.g.
// "examples/counter@go3".
func Identity(module string) string { return module + "@go" + CodeVersion }

// Register adds every example module to b as a builtin. identity gives each
// module's declared code identity (nil: Identity); pass the hash of the
// module's wasm build to have the builtin stand in for that artifact. It
// panics if a module is already registered.
func Register(b *modules.Builtins, identity func(module string) string) {
	if identity == nil {
		identity = Identity
	}
	for _, m := range Modules() {
		b.MustAdd(m.Builtin(identity(m.Name())))
	}
}
