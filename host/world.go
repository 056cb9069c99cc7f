package host

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/views"
)

// Files of a world directory.
const (
	StoreDir       = "store"         // Badger: CAS and journal
	TokenFile      = "token"         // bearer token for the HTTP API, 0600
	ExecutorKey    = "executor.key"  // ed25519 private key, PKCS#8 PEM, 0600
	DaemonInfoFile = "daemon.json"   // {addr, pid} while `aosd serve` runs
	WasmCacheDir   = "wasm-cache"    // compiled wasm code, kept across restarts (safe to delete)
	executorPubPEM = "PUBLIC KEY"    // PEM type of the public half (printed only)
	executorKeyPEM = "PRIVATE KEY"   // PEM type of executor.key
	tokenBytes     = 32              // random bytes in a token (hex-encoded)
	probeTimeout   = 3 * time.Second // how long Connect waits for a daemon's answer
)

// Dir is a world directory.
type Dir string

// Store is the Badger directory.
func (d Dir) Store() string { return filepath.Join(string(d), StoreDir) }

// Path joins a file name to the directory.
func (d Dir) Path(name string) string { return filepath.Join(string(d), name) }

// Created is what Init made.
type Created struct {
	// World is the new world's identity (kernel.World.Identity), journaled
	// as its first record.
	World string
	// ExecutorPublicKey is the built-in executors' public key, hex-encoded.
	ExecutorPublicKey string
}

// Init creates a new world directory: the store (whose journal's first
// record is the world's identity), a bearer token and an executor signing
// key. It refuses a directory that already holds a world.
func Init(d Dir, cfg kernel.Config) (Created, error) { return InitWith(d, cfg, StoreOptions{}) }

// InitWith is Init with store options.
func InitWith(d Dir, cfg kernel.Config, so StoreOptions) (Created, error) {
	for _, n := range []string{StoreDir, TokenFile, ExecutorKey} {
		if _, err := os.Stat(d.Path(n)); err == nil {
			return Created{}, fmt.Errorf("%s: a world already exists here (%s is present); choose another --world or remove it", d, n)
		}
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return Created{}, fmt.Errorf("create world directory: %w", err)
	}
	tok := make([]byte, tokenBytes)
	if _, err := rand.Read(tok); err != nil {
		return Created{}, fmt.Errorf("token: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return Created{}, fmt.Errorf("executor key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return Created{}, fmt.Errorf("executor key: %w", err)
	}
	if err := writeNew(d.Path(TokenFile), []byte(hex.EncodeToString(tok)+"\n")); err != nil {
		return Created{}, err
	}
	if err := writeNew(d.Path(ExecutorKey), pem.EncodeToMemory(&pem.Block{Type: executorKeyPEM, Bytes: der})); err != nil {
		return Created{}, err
	}
	w, db, _, err := openWorld(d, cfg, so)
	if err != nil {
		return Created{}, fmt.Errorf("create store %s: %w", d.Store(), err)
	}
	id := w.Identity()
	if err := errors.Join(w.Close(), db.close()); err != nil {
		return Created{}, fmt.Errorf("close store %s: %w", d.Store(), err)
	}
	return Created{World: id, ExecutorPublicKey: hex.EncodeToString(pub)}, nil
}

func writeNew(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	return f.Close()
}

// LoadExecutorKey reads the world's executor signing key.
func (d Dir) LoadExecutorKey() (ed25519.PrivateKey, error) {
	b, err := os.ReadFile(d.Path(ExecutorKey))
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != executorKeyPEM {
		return nil, fmt.Errorf("%s: not a PEM %q block", d.Path(ExecutorKey), executorKeyPEM)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", d.Path(ExecutorKey), err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ed25519 key", d.Path(ExecutorKey))
	}
	return ek, nil
}

// Token reads the bearer token.
func (d Dir) Token() (string, error) {
	b, err := os.ReadFile(d.Path(TokenFile))
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// Check reports whether d looks like an initialised world.
func (d Dir) Check() error {
	if _, err := os.Stat(d.Store()); err != nil {
		return fmt.Errorf("%s is not a world (no %s/; run `aosd init --world %s` first)", d, StoreDir, d)
	}
	return nil
}

// DaemonInfo is daemon.json.
type DaemonInfo struct {
	Addr string `json:"addr"` // host:port
	PID  int    `json:"pid"`
}

// WriteDaemonInfo writes daemon.json atomically.
func (d Dir) WriteDaemonInfo(info DaemonInfo) error {
	b, _ := json.Marshal(info)
	tmp := d.Path(DaemonInfoFile + ".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, d.Path(DaemonInfoFile))
}

// RemoveDaemonInfo removes daemon.json if it still names this process.
func (d Dir) RemoveDaemonInfo() {
	if info, err := d.ReadDaemonInfo(); err == nil && info.PID == os.Getpid() {
		os.Remove(d.Path(DaemonInfoFile))
	}
}

// ReadDaemonInfo reads daemon.json.
func (d Dir) ReadDaemonInfo() (*DaemonInfo, error) {
	b, err := os.ReadFile(d.Path(DaemonInfoFile))
	if err != nil {
		return nil, err
	}
	var info DaemonInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, fmt.Errorf("%s: %w", d.Path(DaemonInfoFile), err)
	}
	return &info, nil
}

func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Conn is an api.Backend and what it needs closing.
type Conn struct {
	api.Backend
	Remote bool   // through a daemon
	Addr   string // the daemon's address when Remote
	world  *kernel.World
	db     *store // the world's store, closed after it
}

// World is the open world when the connection is local.
func (c *Conn) World() *kernel.World { return c.world }

// Close closes a local world, then its store.
func (c *Conn) Close() error {
	if c.world != nil {
		return errors.Join(c.world.Close(), c.db.close())
	}
	return nil
}

// ConnectOptions tunes Connect.
type ConnectOptions struct {
	Direct bool          // never use a daemon; open the store (fails while one holds it)
	Config kernel.Config // for a direct open
	Store  StoreOptions  // for a direct open
}

// Connect reaches the world in d: through its daemon when daemon.json names
// a live process that answers GET /v1/status with the token, else by opening
// the store directly. A daemon that is alive but does not answer keeps the
// store locked; the error then says so.
func Connect(ctx context.Context, d Dir, opt ConnectOptions) (*Conn, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	found, err := findDaemon(ctx, d, opt)
	if err != nil {
		return nil, err
	}
	if found.client != nil {
		return &Conn{Backend: found.client, Remote: true, Addr: found.info.Addr}, nil
	}
	w, db, cfg, err := openWorld(d, opt.Config, opt.Store)
	if err != nil {
		return nil, found.openError(d, opt, err)
	}
	return &Conn{Backend: &api.Local{W: w, LoadKeys: d.Keys, Config: cfg}, world: w, db: db}, nil
}

// daemonFound is what findDaemon learned about a daemon serving a world.
type daemonFound struct {
	client   *api.Client // a daemon that answers; nil: open the store
	info     *DaemonInfo // daemon.json naming a live process, even if it did not answer
	probeErr error       // why that process did not answer
}

// findDaemon looks for a daemon serving d (unless opt.Direct): daemon.json
// naming a live process that answers GET /v1/status with the token.
func findDaemon(ctx context.Context, d Dir, opt ConnectOptions) (daemonFound, error) {
	var found daemonFound
	if opt.Direct {
		return found, nil
	}
	i, err := d.ReadDaemonInfo()
	if err != nil || !processAlive(i.PID) {
		return found, nil
	}
	found.info = i
	tok, err := d.Token()
	if err != nil {
		return found, err
	}
	cl := &api.Client{Base: "http://" + i.Addr, Token: tok}
	pctx, cancel := context.WithTimeout(ctx, probeTimeout)
	found.probeErr = cl.Ping(pctx)
	cancel()
	if errors.Is(found.probeErr, api.ErrTokenRefused) {
		// The daemon answers: it is the token that is wrong, and the store
		// stays locked, so opening it would only fail less clearly.
		return found, api.Wrap(found.probeErr, http.StatusUnauthorized, api.CodeUnauthorized, string(d), fmt.Sprintf(
			"the daemon serving this world (aosd serve, pid %d, %s) refuses the token read from %s: "+
				"the file does not hold the token the daemon accepts (was it replaced after the daemon started?); restore it, or restart the daemon",
			i.PID, i.Addr, d.Path(TokenFile)))
	}
	if found.probeErr == nil {
		found.client = cl
	}
	return found, nil
}

// openError says why the store of d did not open: a store another process
// holds gets a message naming who, as far as daemon.json tells.
func (found daemonFound) openError(d Dir, opt ConnectOptions, err error) error {
	if !isLocked(err) {
		return fmt.Errorf("open world %s: %w", d, err)
	}
	switch {
	case found.info != nil:
		return api.Wrap(err, 0, api.CodeLocked, string(d), fmt.Sprintf(
			"world is held by aosd serve (pid %d, %s) which does not answer (%v); stop it or wait, the store stays locked meanwhile", found.info.PID, found.info.Addr, found.probeErr))
	case opt.Direct:
		return api.Wrap(err, 0, api.CodeLocked, string(d), "world is locked by another process (a running `aosd serve`?); drop --direct to go through the daemon")
	default:
		return api.Wrap(err, 0, api.CodeLocked, string(d), "world is locked by another process and no daemon answers for it (daemon.json missing or stale)")
	}
}

// CheckJournal checks the journal of the world in d: through its daemon
// when one serves it (as Connect finds it), else on the store alone. It
// does not open the world: opening replays the journal, and a journal that
// breaks a rule may not replay, while the check must still say what is
// wrong with it.
func CheckJournal(ctx context.Context, d Dir, opt ConnectOptions) (*views.JournalCheck, error) {
	if err := d.Check(); err != nil {
		return nil, err
	}
	found, err := findDaemon(ctx, d, opt)
	if err != nil {
		return nil, err
	}
	if found.client != nil {
		return found.client.CheckJournal(ctx)
	}
	st, err := openStoreAt(d.Store(), opt.Store)
	if err != nil {
		return nil, found.openError(d, opt, err)
	}
	defer st.close()
	out, err := views.CheckJournal(ctx, st.db.Journal(), st.db.CAS().Get)
	if err != nil {
		return nil, api.AsError(err, "journal check")
	}
	return out, nil
}
