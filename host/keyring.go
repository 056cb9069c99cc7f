package host

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"os"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/receipts"
)

// ExecutorsFile holds the world's trusted executor keys (receipts keyring JSON).
const ExecutorsFile = "executors.json"

// Keyring reads the trusted executor keys, with the built-in executors'
// key trusted for the effects effects.Builtins runs (see keyring).
func (d Dir) Keyring() (*receipts.Keyring, error) {
	return d.keyring(effects.BuiltinEffects())
}

// keyring reads the trusted executor keys from the keyring file. The
// built-in executors' key (executor.key) is trusted under
// receipts.BuiltinExecutor for exactly the builtin effects, whatever the
// file says: the file is rewritten by `keys add` and `rm`, and may predate
// keys having effects or a daemon with other built-in executors. Any other
// key named receipts.BuiltinExecutor in the file is left out: only
// executor.key may sign as the built-in executors.
func (d Dir) keyring(builtin []string) (*receipts.Keyring, error) {
	kr := receipts.NewKeyring()
	if _, err := os.Stat(d.Path(ExecutorsFile)); err == nil {
		if kr, err = receipts.ReadKeyringFile(d.Path(ExecutorsFile)); err != nil {
			return nil, err
		}
	}
	priv, err := d.LoadExecutorKey()
	if err != nil {
		return nil, fmt.Errorf("executor key: %w", err)
	}
	for _, k := range kr.List() {
		if k.Name == receipts.BuiltinExecutor {
			_ = kr.Remove(k.ID)
		}
	}
	if len(builtin) == 0 {
		return kr, nil
	}
	if err := kr.Add(receipts.BuiltinExecutor, priv.Public().(ed25519.PublicKey), builtin); err != nil {
		return nil, fmt.Errorf("executor key: %w", err)
	}
	return kr, nil
}

// Keys are the world's trusted executor keys as the API lists and changes
// them (api.Keys): read from the keyring file (Keyring), kept in it.
func (d Dir) Keys() (*api.Keys, error) {
	kr, err := d.Keyring()
	if err != nil {
		return nil, err
	}
	return api.NewKeys(d.Path(ExecutorsFile), kr), nil
}

// NewExecutors builds the executor side for `aosd serve`: the keyring the
// kernel verifies receipts against (shared, so keys added through the API
// take effect at once) and a dispatcher with the built-in executors signing
// with the world's executor key. Start the dispatcher once the world is open.
func NewExecutors(d Dir, builtins map[string]effects.Executor, log *slog.Logger) (*receipts.Keyring, *effects.Dispatcher, error) {
	kr, err := d.keyring(effects.EffectsOf(builtins))
	if err != nil {
		return nil, nil, err
	}
	priv, err := d.LoadExecutorKey()
	if err != nil {
		return nil, nil, err
	}
	return kr, effects.New(effects.Config{Name: receipts.BuiltinExecutor, Key: priv, Executors: builtins, Logger: log}), nil
}
