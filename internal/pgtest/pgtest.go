package pgtest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readyLine is what the postmaster logs once it accepts connections.
const readyLine = "database system is ready to accept connections"

// startTimeout bounds initdb plus the server's start on a loaded machine.
const startTimeout = 2 * time.Minute

// stopTimeout bounds a fast shutdown before the server is killed.
const stopTimeout = 30 * time.Second

// Cluster is one throwaway PostgreSQL cluster: a data directory and the
// postmaster running on it.
type Cluster struct {
	Dir  string // the data directory
	Port int    // its loopback TCP port

	bin  string
	cred *syscall.Credential

	mu  sync.Mutex
	srv *server      // the postmaster started last
	log bytes.Buffer // the servers' stderr (its last 64 KiB)
}

// server is one run of the postmaster.
type server struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed once it has exited
	stop   sync.Once
	err    error // of the stop
}

// URL is the connection string of database db ("postgres" when empty) as
// the superuser "postgres", over loopback TCP without TLS.
func (c *Cluster) URL(db string) string {
	if db == "" {
		db = "postgres"
	}
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.Port, db)
}

// Log is what the server wrote to stderr so far (its last 64 KiB).
func (c *Cluster) Log() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.log.String()
}

// Bin is the directory holding initdb and postgres: $AOS_PG_BIN, the
// directory of initdb on PATH, or the newest /usr/lib/postgresql/*/bin.
func Bin() (string, error) {
	if d := os.Getenv("AOS_PG_BIN"); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("pgtest: AOS_PG_BIN=%s holds no initdb: %w", d, err)
		}
		return d, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if r, err := filepath.EvalSymlinks(p); err == nil {
			p = r
		}
		return filepath.Dir(p), nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", errors.New("pgtest: no PostgreSQL server binaries: no initdb in $AOS_PG_BIN, on PATH or in /usr/lib/postgresql/*/bin (apt-get install -y postgresql-15)")
}

// version is the major version in a /usr/lib/postgresql/<version>/bin path.
func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// need returns the binaries' directory, or skips the test loudly without
// them (fails it under CI=true).
func need(t testing.TB) string {
	t.Helper()
	bin, err := Bin()
	if err == nil {
		return bin
	}
	msg := "NO POSTGRES: " + err.Error() + "; the PostgreSQL tests did NOT run"
	if os.Getenv("CI") == "true" {
		t.Fatal(msg + " (CI=true: this is a failure)")
	}
	fmt.Fprintln(os.Stderr, "!!!", msg)
	t.Skip(msg)
	return ""
}

// Start starts a cluster in t.TempDir() for this test and stops it when the
// test ends. conf lines ("name = value") are added to its postgresql.conf.
// Without PostgreSQL it skips the test (fails it under CI=true).
func Start(t testing.TB, conf ...string) *Cluster {
	t.Helper()
	bin := need(t)
	c, err := start(bin, t.TempDir(), conf...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Error(err)
		}
	})
	return c
}

// shared is the one cluster of a test binary whose TestMain calls Main.
var shared struct {
	mu      sync.Mutex
	inMain  bool
	dir     string
	cluster *Cluster
	err     error
}

// Main runs a test binary's tests (m.Run) and then stops the cluster
// Shared started, if any, and removes its directory. Call it from TestMain:
//
//	func TestMain(m *testing.M) { pgtest.Main(m) }
func Main(m *testing.M) {
	shared.mu.Lock()
	shared.inMain = true
	shared.mu.Unlock()
	code := m.Run()
	shared.mu.Lock()
	c, dir := shared.cluster, shared.dir
	shared.mu.Unlock()
	if c != nil {
		if err := c.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			if code == 0 {
				code = 1
			}
		}
	}
	if dir != "" {
		os.RemoveAll(dir)
	}
	os.Exit(code)
}

// Shared returns the test binary's one cluster, starting it on first use;
// Main stops it after the last test. Tests sharing it must keep apart by
// database or schema. Without PostgreSQL it skips the test (fails it under
// CI=true).
func Shared(t testing.TB) *Cluster {
	t.Helper()
	bin := need(t)
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if !shared.inMain {
		t.Fatal("pgtest: Shared needs the test binary's TestMain to call pgtest.Main (which stops the cluster)")
	}
	if shared.cluster == nil && shared.err == nil {
		shared.dir, shared.err = os.MkdirTemp("", "aos-pgtest-")
		if shared.err == nil {
			shared.cluster, shared.err = start(bin, shared.dir)
		}
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.cluster
}

// start runs initdb into base/data and starts the server on a free
// loopback port, retrying with another port if the one picked was taken
// meanwhile.
func start(bin, base string, conf ...string) (*Cluster, error) {
	cred, err := serverUser(base)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(base, "data")
	if err := initdb(bin, data, cred, conf); err != nil {
		return nil, err
	}
	var last error
	for range 3 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		c := &Cluster{Dir: data, Port: port, bin: bin, cred: cred}
		if last = c.run(); last == nil {
			return c, nil
		}
		if !strings.Contains(last.Error(), "could not bind") && !strings.Contains(last.Error(), "could not create any TCP/IP sockets") {
			break
		}
	}
	return nil, last
}

// serverUser is the credential the server runs with: the "postgres" user's
// when the tests run as root (PostgreSQL refuses to run as root), the
// current user's (nil) otherwise. As root it also makes the directories
// from the system's temporary directory down to base traversable, and base
// owned by that user.
func serverUser(base string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgtest: running as root, and PostgreSQL refuses root: no \"postgres\" user to run it as (%w)", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgtest: the postgres user's ids: %w", err)
	}
	tmp := filepath.Clean(os.TempDir())
	for d := filepath.Dir(base); strings.HasPrefix(d, tmp+string(filepath.Separator)); d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return nil, err
		}
		if fi.Mode().Perm()&0o001 == 0 {
			if err := os.Chmod(d, fi.Mode().Perm()|0o011); err != nil {
				return nil, fmt.Errorf("pgtest: let the postgres user through %s: %w", d, err)
			}
		}
	}
	if err := os.Chown(base, int(uid), int(gid)); err != nil {
		return nil, fmt.Errorf("pgtest: give %s to the postgres user: %w", base, err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// initdb creates the cluster: superuser "postgres", trust authentication
// (loopback only, a throwaway), UTF-8 and the C locale, no fsync of the
// files initdb writes (the server itself keeps fsync on), and the extra
// postgresql.conf lines.
func initdb(bin, data string, cred *syscall.Credential, extra []string) error {
	cmd := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "--auth=trust",
		"--no-sync", "-E", "UTF8", "--locale=C", "--no-instructions")
	cmd.SysProcAttr = procAttr(cred)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb %s: %w\n%s", data, err, out)
	}
	// Loopback TCP only; fsync and synchronous_commit stay at their
	// defaults (on): what tests measure is what a real server does.
	conf := "\n# pgtest\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nlogging_collector = off\nmax_connections = 200\n"
	for _, line := range extra {
		conf += line + "\n"
	}
	f, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	_, err = f.WriteString(conf)
	return errors.Join(err, f.Close())
}

// freePort is a loopback TCP port nothing listened on a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("pgtest: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// run starts the postmaster and returns once it logs that it accepts
// connections, or with its log if it exits first.
func (c *Cluster) run() error {
	srv := &server{exited: make(chan struct{})}
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.Dir, "-p", strconv.Itoa(c.Port))
	cmd.SysProcAttr = procAttr(c.cred)
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("pgtest: start postgres: %w", err)
	}
	srv.cmd = cmd
	c.mu.Lock()
	c.srv = srv
	c.mu.Unlock()
	ready := make(chan struct{})
	go c.readLog(stderr, ready)
	go func() {
		cmd.Wait()
		close(srv.exited)
	}()
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	select {
	case <-ready:
		return nil
	case <-srv.exited:
		return fmt.Errorf("pgtest: postgres exited before accepting connections:\n%s", c.Log())
	case <-timer.C:
		c.Stop()
		return fmt.Errorf("pgtest: postgres did not accept connections within %s:\n%s", startTimeout, c.Log())
	}
}

// readLog keeps the server's stderr (its last 64 KiB) and closes ready at
// the line saying it accepts connections.
func (c *Cluster) readLog(r io.Reader, ready chan struct{}) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	signalled := false
	for sc.Scan() {
		line := sc.Text()
		c.mu.Lock()
		if c.log.Len() > 64<<10 {
			rest := append([]byte(nil), c.log.Bytes()[c.log.Len()-32<<10:]...)
			c.log.Reset()
			c.log.Write(rest)
		}
		c.log.WriteString(line)
		c.log.WriteByte('\n')
		c.mu.Unlock()
		if !signalled && strings.Contains(line, readyLine) {
			signalled = true
			close(ready)
		}
	}
	io.Copy(io.Discard, r)
}

// Stop shuts the server down (fast shutdown: open sessions are ended,
// everything committed stays) and waits for it, killing it if it takes
// longer than 30 seconds. Stopping twice is harmless.
func (c *Cluster) Stop() error { return c.halt(syscall.SIGINT) }

// Crash stops the server the way a crash of the database server would,
// minus the machine: an immediate shutdown (SIGQUIT), which ends every
// process of the server at once without writing out its shared memory,
// so WAL still in its buffers is lost, and the next start recovers from
// the WAL on disk. The page cache survives (the machine did not crash), so
// it loses what was not written, not what was not flushed.
func (c *Cluster) Crash() error { return c.halt(syscall.SIGQUIT) }

// Restart starts the server again on the same data directory and port
// after Stop or Crash, and returns once it accepts connections (after its
// crash recovery).
func (c *Cluster) Restart() error {
	c.mu.Lock()
	srv := c.srv
	c.mu.Unlock()
	select {
	case <-srv.exited:
	default:
		return errors.New("pgtest: restart of a running cluster")
	}
	return c.run()
}

// halt sends sig to the running postmaster and waits for it to exit.
func (c *Cluster) halt(sig syscall.Signal) error {
	c.mu.Lock()
	srv := c.srv
	c.mu.Unlock()
	srv.stop.Do(func() {
		select {
		case <-srv.exited:
			return
		default:
		}
		if err := srv.cmd.Process.Signal(sig); err != nil {
			srv.err = fmt.Errorf("pgtest: stop postgres: %w", err)
		}
		timer := time.NewTimer(stopTimeout)
		defer timer.Stop()
		select {
		case <-srv.exited:
		case <-timer.C:
			srv.cmd.Process.Kill()
			<-srv.exited
			srv.err = fmt.Errorf("pgtest: postgres did not stop within %s; killed it:\n%s", stopTimeout, c.Log())
		}
	})
	return srv.err
}
