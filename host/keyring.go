package host

import (
	"crypto/ed25519"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/effects"
	"github.com/aos-kernel/aos/receipts"
)

// ExecutorsFile holds the world's trusted executor keys (receipts keyring JSON).
const ExecutorsFile = "executors.json"

// Keyring reads the trusted executor keys, with the built-in executors'
// key trusted for the effects effects.Builtins runs (see keyring).
func (d Dir) Keyring() (*receipts.Keyring, error) {
	var kr *receipts.Keyring
	err := d.withFiles(func(f files) (err error) {
		kr, err = readKeyring(f, effects.BuiltinEffects())
		return err
	})
	return kr, err
}

// readKeyring reads the trusted executor keys from the keyring file. The
// built-in executors' key (executor.key) is trusted under
// receipts.BuiltinExecutor for exactly the builtin effects, whatever the
// file says: the file is rewritten by `keys add` and `rm`, and may predate
// keys having effects or a daemon with other built-in executors. Any other
// key named receipts.BuiltinExecutor in the file is left out: only
// executor.key may sign as the built-in executors.
func readKeyring(f files, builtin []string) (*receipts.Keyring, error) {
	kr := receipts.NewKeyring()
	b, err := f.read(ExecutorsFile)
	switch {
	case err == nil:
		if err := kr.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("%s: %w", f.where(ExecutorsFile), err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return nil, err
	}
	priv, err := loadExecutorKey(f)
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

// Keys are the trusted executor keys of the Badger world in d as the API
// lists and changes them (api.Keys), kept in its keyring file. A world on
// PostgreSQL keeps them in its database, which an open world reaches
// (Connect); Keys refuses it.
func (d Dir) Keys() (*api.Keys, error) {
	pc, err := d.Postgres()
	if err != nil {
		return nil, err
	}
	if pc != nil {
		return nil, fmt.Errorf("%s: the world's keys are in %s; open the world to change them", d, pc.where())
	}
	kr, err := readKeyring(dirFiles(d), effects.BuiltinEffects())
	if err != nil {
		return nil, err
	}
	return keysIn(dirFiles(d), kr), nil
}

// keysIn are the world's trusted executor keys as the API lists and
// changes them (api.Keys): kr, kept in the keyring file of f.
func keysIn(f files, kr *receipts.Keyring) *api.Keys {
	return api.NewKeysSaving(func(kr *receipts.Keyring) error {
		text, err := kr.MarshalJSON()
		if err != nil {
			return err
		}
		return f.write(ExecutorsFile, append(text, '\n'))
	}, kr)
}

// NewExecutors builds the executor side for `aosd serve`: the keyring the
// kernel verifies receipts against (shared, so keys added through the API
// take effect at once) and a dispatcher with the built-in executors signing
// with the world's executor key. Start the dispatcher once the world is open.
func NewExecutors(d Dir, builtins map[string]effects.Executor, log *slog.Logger) (*receipts.Keyring, *effects.Dispatcher, error) {
	var kr *receipts.Keyring
	var disp *effects.Dispatcher
	err := d.withFiles(func(f files) (err error) {
		kr, disp, err = newExecutors(f, builtins, log)
		return err
	})
	return kr, disp, err
}

// newExecutors is NewExecutors on the world's files.
func newExecutors(f files, builtins map[string]effects.Executor, log *slog.Logger) (*receipts.Keyring, *effects.Dispatcher, error) {
	kr, err := readKeyring(f, effects.EffectsOf(builtins))
	if err != nil {
		return nil, nil, err
	}
	priv, err := loadExecutorKey(f)
	if err != nil {
		return nil, nil, err
	}
	return kr, effects.New(effects.Config{Name: receipts.BuiltinExecutor, Key: priv, Executors: builtins, Logger: log}), nil
}
