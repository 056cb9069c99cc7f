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
	"github.com/aos-kernel/aos/effects"
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
	// Postgres names the database of a world on PostgreSQL (InitPostgres):
	// its URL, without a password, and schema; nil for a Badger world.
	Postgres *PostgresConfig
	// Joined says InitPostgres found a world in the schema already and
	// made this directory a node of it, writing nothing to the database.
	Joined bool
	// PasswordNotWritten says the URL InitPostgres was given held a
	// password: it was used to connect, and not written to postgres.json.
	PasswordNotWritten bool
}

// Init creates a new world directory: the store (whose journal's first
// record is the world's identity), a bearer token and an executor signing
// key. It refuses a directory that already holds a world.
func Init(d Dir, cfg kernel.Config) (Created, error) { return InitWith(d, cfg, StoreOptions{}) }

// InitWith is Init with store options.
func InitWith(d Dir, cfg kernel.Config, so StoreOptions) (Created, error) {
	if err := d.checkNew(); err != nil {
		return Created{}, err
	}
	if err := os.MkdirAll(string(d), 0o700); err != nil {
		return Created{}, fmt.Errorf("create world directory: %w", err)
	}
	tok, key, pub, err := newSecrets()
	if err != nil {
		return Created{}, err
	}
	if err := writeNew(d.Path(TokenFile), tok); err != nil {
		return Created{}, err
	}
	if err := writeNew(d.Path(ExecutorKey), key); err != nil {
		return Created{}, err
	}
	w, db, _, err := openWorld(d, cfg, so, roleOwner)
	if err != nil {
		return Created{}, fmt.Errorf("create store %s: %w", d.Store(), err)
	}
	id := w.Identity()
	if err := errors.Join(w.Close(), db.close()); err != nil {
		return Created{}, fmt.Errorf("close store %s: %w", d.Store(), err)
	}
	return Created{World: id, ExecutorPublicKey: hex.EncodeToString(pub)}, nil
}

// checkNew refuses a directory that holds a world already.
func (d Dir) checkNew() error {
	for _, n := range []string{StoreDir, TokenFile, ExecutorKey, PostgresFile} {
		if _, err := os.Stat(d.Path(n)); err == nil {
			return fmt.Errorf("%s: a world already exists here (%s is present); choose another --world or remove it", d, n)
		}
	}
	return nil
}

// newSecrets makes a new world's bearer token (its file's text) and
// executor signing key (PKCS#8 PEM, and its public half).
func newSecrets() (tok, key []byte, pub ed25519.PublicKey, err error) {
	t := make([]byte, tokenBytes)
	if _, err := rand.Read(t); err != nil {
		return nil, nil, nil, fmt.Errorf("token: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("executor key: %w", err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("executor key: %w", err)
	}
	return []byte(hex.EncodeToString(t) + "\n"), pem.EncodeToMemory(&pem.Block{Type: executorKeyPEM, Bytes: der}), pub, nil
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
	var k ed25519.PrivateKey
	err := d.withFiles(func(f files) (err error) {
		k, err = loadExecutorKey(f)
		return err
	})
	return k, err
}

// loadExecutorKey reads the executor signing key from the world's files.
func loadExecutorKey(f files) (ed25519.PrivateKey, error) {
	b, err := f.read(ExecutorKey)
	if err != nil {
		return nil, err
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != executorKeyPEM {
		return nil, fmt.Errorf("%s: not a PEM %q block", f.where(ExecutorKey), executorKeyPEM)
	}
	k, err := x509.ParsePKCS8PrivateKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", f.where(ExecutorKey), err)
	}
	ek, ok := k.(ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: not an ed25519 key", f.where(ExecutorKey))
	}
	return ek, nil
}

// Token reads the bearer token.
func (d Dir) Token() (string, error) {
	var tok string
	err := d.withFiles(func(f files) (err error) {
		tok, err = readToken(f)
		return err
	})
	return tok, err
}

// readToken reads the bearer token from the world's files.
func readToken(f files) (string, error) {
	b, err := f.read(TokenFile)
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// withFiles runs fn on the world's files: its directory's, or, for a world
// on PostgreSQL, its database's (connected to for the call).
func (d Dir) withFiles(fn func(files) error) error {
	pc, err := d.Postgres()
	if err != nil {
		return err
	}
	if pc == nil {
		return fn(dirFiles(d))
	}
	pg, err := openPostgresDB(pc, "", StoreOptions{}, nil)
	if err != nil {
		return fmt.Errorf("world %s: %w", d, err)
	}
	return errors.Join(fn(pgFiles{pg}), pg.close())
}

// Check reports whether d looks like an initialised world: a Badger store,
// or postgres.json naming its database.
func (d Dir) Check() error {
	if _, err := os.Stat(d.Store()); err == nil {
		return nil
	}
	if _, err := os.Stat(d.Path(PostgresFile)); err == nil {
		return nil
	}
	return fmt.Errorf("%s is not a world (no %s/ nor %s; run `aosd init --world %s` first)", d, StoreDir, PostgresFile, d)
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
	Direct bool // never use a daemon; open the store (fails while one holds it)
	// ReadOnly says the caller only reads: a world on PostgreSQL that no
	// daemon serves for it is then opened without its lease (a reader),
	// so reading never takes the world from its owner. A Badger world
	// opens the same either way.
	ReadOnly bool
	Config   kernel.Config // for a direct open
	Store    StoreOptions  // for a direct open
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
	pc, err := d.Postgres()
	if err != nil {
		return nil, err
	}
	if pc != nil {
		return connectPostgres(ctx, d, pc, opt, found)
	}
	w, db, cfg, err := openWorld(d, opt.Config, opt.Store, roleOwner)
	if err != nil {
		return nil, found.openError(d, opt, err)
	}
	return localConn(w, db, cfg), nil
}

// localConn is a connection to a world this process opened.
func localConn(w *kernel.World, st *store, cfg kernel.Config) *Conn {
	var keys *api.Keys
	load := func() (*api.Keys, error) {
		if keys == nil {
			kr, err := readKeyring(st.files, effects.BuiltinEffects())
			if err != nil {
				return nil, err
			}
			keys = keysIn(st.files, kr)
		}
		return keys, nil
	}
	l := &api.Local{W: w, LoadKeys: load, Config: cfg}
	if st.pg != nil {
		l.Lease = st.pg.view
	}
	return &Conn{Backend: l, world: w, db: st}
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
	st, err := openStoreAs(d, opt.Store, roleReader, opt.Config.Logger)
	if err != nil {
		return nil, found.openError(d, opt, err)
	}
	defer st.close()
	out, err := views.CheckJournal(ctx, st.log, st.raw.Get)
	if err != nil {
		return nil, api.AsError(err, "journal check")
	}
	return out, nil
}
