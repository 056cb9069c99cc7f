package host_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/api"
	"github.com/aos-kernel/aos/host"
	"github.com/aos-kernel/aos/kernel"
)

// TestRun: Run is `aosd serve`: it refuses a directory that is not a world,
// serves the API once Ready is called (daemon.json names it), and on ctx's
// end closes the world and removes daemon.json.
func TestRun(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	if err := host.Run(context.Background(), dir, host.Options{Listen: "127.0.0.1:0"}); err == nil {
		t.Fatal("Run served a directory that is not a world")
	}
	if _, err := host.Init(host.Dir(dir), kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- host.Run(ctx, dir, host.Options{Listen: "127.0.0.1:0", Ready: func(addr string) {
			defer cancel()
			info, err := host.Dir(dir).ReadDaemonInfo()
			if err != nil || info.Addr != addr || info.PID != os.Getpid() {
				t.Errorf("daemon.json %+v, %v; want addr %s", info, err, addr)
			}
			tok, _ := host.Dir(dir).Token()
			req, _ := http.NewRequest("GET", "http://"+addr+"/v1/status", nil)
			req.Header.Set("Authorization", "Bearer "+tok)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Errorf("status: %v", err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Errorf("status: HTTP %d", resp.StatusCode)
			}
		}})
	}()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	if _, err := os.Stat(host.Dir(dir).Path(host.DaemonInfoFile)); !os.IsNotExist(err) {
		t.Fatalf("daemon.json left behind: %v", err)
	}
	// Closed: the store opens again.
	c, err := host.Connect(context.Background(), host.Dir(dir), host.ConnectOptions{Direct: true})
	if err != nil {
		t.Fatalf("reopen after Run: %v", err)
	}
	c.Close()
}

// TestConnectWithAWrongToken: when the world's daemon answers but refuses
// the token file's token, Connect says that, naming the daemon and the
// token file it read, instead of that the daemon "does not answer".
func TestConnectWithAWrongToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "w")
	if _, err := host.Init(host.Dir(dir), kernel.Config{}); err != nil {
		t.Fatal(err)
	}
	h, err := host.Open(context.Background(), dir, host.Options{Listen: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	tokenFile := host.Dir(dir).Path(host.TokenFile)
	if err := os.WriteFile(tokenFile, []byte("not the daemon's token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = host.Connect(context.Background(), host.Dir(dir), host.ConnectOptions{})
	var de *api.Error
	if !errors.As(err, &de) || de.Code != api.CodeUnauthorized {
		t.Fatalf("Connect with a wrong token: %v, want an unauthorized error", err)
	}
	for _, want := range []string{"refuses the token read from " + tokenFile, h.Addr(), fmt.Sprintf("pid %d", os.Getpid())} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), "does not answer") {
		t.Errorf("%q says the daemon does not answer", err)
	}
}
