package main_test

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/host"
)

// nginxPath is Debian's nginx, or the test is skipped loudly (failed under
// CI=true, where .ci/run installs it).
func nginxPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{"nginx", "/usr/sbin/nginx"} {
		if path, err := exec.LookPath(p); err == nil {
			return path
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("nginx is missing: CI must run the reverse-proxy test (apt-get install nginx)")
	}
	t.Skip("NO NGINX: deploy/nginx/aos.conf was not tested (apt-get install nginx)")
	return ""
}

// selfSigned writes a certificate for 127.0.0.1 and its key under dir, and
// returns a pool that trusts it.
func selfSigned(t *testing.T, dir string) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "aos test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
	cert, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(cert)
	return certFile, keyFile, pool
}

// freePort is a loopback port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// startNginx runs nginx in the foreground with deploy/nginx/aos.conf, its
// listen address, upstream and certificate replaced, and returns the HTTPS
// base URL.
func startNginx(t *testing.T, upstream string) (base string, client *http.Client) {
	t.Helper()
	bin := nginxPath(t)
	dir := t.TempDir()
	cert, key, pool := selfSigned(t, dir)
	b, err := os.ReadFile(filepath.Join(repoRoot, "deploy", "nginx", "aos.conf"))
	if err != nil {
		t.Fatal(err)
	}
	listen := freePort(t)
	conf := string(b)
	for old, repl := range map[string]string{
		"server 127.0.0.1:7878;":       "server " + upstream + ";",
		"listen 443 ssl;":              "listen " + listen + " ssl;",
		"/etc/ssl/aos/fullchain.pem":   cert,
		"/etc/ssl/aos/privkey.pem":     key,
		"server_name aos.example.com;": "server_name 127.0.0.1;",
	} {
		if !strings.Contains(conf, old) {
			t.Fatalf("deploy/nginx/aos.conf no longer says %q", old)
		}
		conf = strings.ReplaceAll(conf, old, repl)
	}
	os.WriteFile(filepath.Join(dir, "aos.conf"), []byte(conf), 0o644)
	// The test's own top level: foreground, files in dir, workers as the
	// user running the test.
	main := fmt.Sprintf(`daemon off;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
user %[2]s;
events {}
http {
    access_log %[1]s/access.log;
    client_body_temp_path %[1]s/body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    include %[1]s/aos.conf;
}
`, dir, currentUser(t))
	os.WriteFile(filepath.Join(dir, "nginx.conf"), []byte(main), 0o644)
	if r := runCmd(t, exec.Command(bin, "-t", "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))); r.code != 0 {
		t.Fatalf("nginx -t: %s%s", r.stdout, r.stderr)
	}
	cmd := exec.Command(bin, "-p", dir, "-c", filepath.Join(dir, "nginx.conf"))
	errb := &syncBuffer{}
	cmd.Stdout, cmd.Stderr = errb, errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt) // SIGINT: nginx's fast shutdown
		cmd.Wait()
	})
	waitFor(t, "nginx to listen", func() bool {
		c, err := net.Dial("tcp", listen)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return "https://" + listen, &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
}

func currentUser(t *testing.T) string {
	t.Helper()
	if os.Getuid() == 0 {
		return "root"
	}
	return fmt.Sprint(os.Getuid())
}

// TestNginxProxy: deploy/nginx/aos.conf, run by Debian's nginx in front of a
// real daemon, serves the API over TLS with the bearer token passed on (401
// without it), takes events, streams GET /v1/journal?follow=true record by
// record (a record journaled after the stream began arrives while it is
// open: proxy_buffering off), streams a backup that reads back whole, and
// serves the inspector.
func TestNginxProxy(t *testing.T) {
	t.Parallel()
	w := newWorld(t)
	ok(t, w, "apply", built.Path(t, "counter"))
	d := startDaemon(t, w)
	tok := token(t, w)
	base, client := startNginx(t, d.addr)
	do := func(method, path, body string, auth bool) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, base+path, strings.NewReader(body))
		if auth {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := do("GET", "/v1/status", "", true); code != 200 || !strings.Contains(body, `"journal_height"`) {
		t.Fatalf("status through the proxy: %d %s", code, body)
	}
	if code, body := do("GET", "/v1/status", "", false); code != 401 || !strings.Contains(body, `"unauthorized"`) {
		t.Fatalf("status without the token: %d %s", code, body)
	}
	if code, body := do("POST", "/v1/events", `{"schema":"`+countEv+`","value":{"key":"a","by":1}}`, true); code != 200 || !strings.Contains(body, `"seq"`) {
		t.Fatalf("event through the proxy: %d %s", code, body)
	}
	if code, body := do("GET", "/", "", false); code != 200 || !strings.Contains(body, "<html") {
		t.Fatalf("the inspector through the proxy: %d %.200s", code, body)
	}

	// Follow the journal through the proxy; once its answer began, journal
	// an event: its record must come through while the stream is open.
	h := getStatus(t, w).JournalHeight
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/v1/journal?follow=true&from=%d", base, h+1), nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req = req.WithContext(ctx)
	began := make(chan int, 1)
	lines := make(chan string, 16)
	go func() {
		defer close(lines)
		resp, err := client.Do(req)
		if err != nil {
			began <- 0
			return
		}
		defer resp.Body.Close()
		began <- resp.StatusCode
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	select {
	case code := <-began:
		if code != 200 {
			t.Fatalf("follow through the proxy: %d", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the follow's answer did not begin through the proxy (buffered?)")
	}
	ok(t, w, "send", countEv, `{"key":"followed","by":1}`)
	select {
	case line, open := <-lines:
		var r struct {
			Seq  uint64
			Kind string
		}
		if !open || json.Unmarshal([]byte(line), &r) != nil || r.Seq != h+1 || r.Kind != "event" {
			t.Fatalf("first followed line %q (stream open: %v), want the event at seq %d", line, open, h+1)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a record journaled after the follow began did not come through the proxy while the stream was open (buffered?)")
	}
	cancel()

	// A backup through the proxy reads back whole.
	file := filepath.Join(t.TempDir(), "through-proxy.aosbackup")
	req, _ = http.NewRequest("GET", base+"/v1/backup", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp2, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	f, _ := os.Create(file)
	io.Copy(f, resp2.Body)
	resp2.Body.Close()
	f.Close()
	info, err := host.ReadBackupFile(file)
	if resp2.StatusCode != 200 || err != nil || info.JournalHeight < h+2 {
		t.Fatalf("backup through the proxy: %d %+v %v", resp2.StatusCode, info, err)
	}
}
