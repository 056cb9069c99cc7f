package main

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/aos-kernel/aos/build"
)

func cmdDemo(fs *flag.FlagSet, a *app) func([]string) error {
	manifests := fs.String("manifests", filepath.Join("examples", "manifests"), "directory holding the example manifests")
	return func(pos []string) error {
		if err := wantArgs(pos, 0, 0, "no arguments"); err != nil {
			return err
		}
		worldSet := false
		fs.Visit(func(f *flag.Flag) { worldSet = worldSet || f.Name == "world" })
		tmp, err := os.MkdirTemp("", "aos-demo-")
		if err != nil {
			return err
		}
		if !worldSet {
			a.world = filepath.Join(tmp, "world")
		}
		counter := filepath.Join(*manifests, "counter")
		if _, err := os.Stat(counter); err != nil {
			return fmt.Errorf("counter example not found at %s: run from the repository root or pass --manifests", counter)
		}
		// The manifest is built and applied from a copy, so the demo never
		// rewrites the repository's files (a Go release other than the one
		// that pinned the example's hash builds other bytes).
		m := filepath.Join(tmp, "counter")
		fmt.Fprintf(a.stdout, "$ cp %s %s/\n", filepath.Join(counter, "*.json"), m)
		if err := build.Copy(counter, m); err != nil {
			return err
		}
		step := func(world bool, args ...string) error {
			if world {
				args = append(args, "--world", a.world)
			}
			fmt.Fprintf(a.stdout, "\n$ aosd %s\n", strings.Join(quoteArgs(args), " "))
			code := run(a.ctx, args, a.stdin, a.stdout, a.stderr)
			if code != exitOK {
				return &exitCodeError{code}
			}
			return nil
		}
		if err := step(false, "build", m, "--sources-from", counter); err != nil {
			return err
		}
		wf := "com.example/counter.step@1"
		for _, s := range [][]string{
			{"init"},
			{"apply", m},
			{"send", "com.example/CountEvent@1", `{"key":"a","by":1}`},
			{"send", "com.example/CountEvent@1", `{"key":"a","by":41}`},
			{"send", "com.example/CountEvent@1", `{"key":"b","by":7}`},
			{"status"},
			{"cells", "ls", wf},
			{"cells", "show", wf, "a"},
			{"trace", wf, "a"},
			{"journal", "--limit", "6"},
		} {
			if err := step(true, s...); err != nil {
				return err
			}
		}
		if err := demoEffect(a, tmp, *manifests, step); err != nil {
			return err
		}
		fmt.Fprintf(a.stdout, "\nThe worlds are in %s. Next, try:\n\n", tmp)
		fmt.Fprintf(a.stdout, "    aosd cells ls %s --world %s\n", wf, a.world)
		fmt.Fprintf(a.stdout, "    aosd serve --world %s    # then open the inspector at the address it prints\n", a.world)
		fmt.Fprint(a.stdout, pathHint())
		return nil
	}
}

// demoEffect is the demo's second part: the reminders example in a world of
// its own, served by a daemon the demo runs in the background (only a
// daemon runs executors), so a timer is set, fires, and its receipt is
// delivered; the trace shows the intent and the receipt.
func demoEffect(a *app, tmp, manifests string, step func(bool, ...string) error) error {
	src := filepath.Join(manifests, "reminders")
	m := filepath.Join(tmp, "reminders")
	fmt.Fprintf(a.stdout, "\n# An effect and its receipt: a reminder sets a timer; the daemon's built-in executor fires it.\n")
	fmt.Fprintf(a.stdout, "$ cp %s %s/\n", filepath.Join(src, "*.json"), m)
	if err := build.Copy(src, m); err != nil {
		return err
	}
	if err := step(false, "build", m, "--sources-from", src); err != nil {
		return err
	}
	counterWorld := a.world
	a.world = filepath.Join(tmp, "timers")
	defer func() { a.world = counterWorld }()
	for _, s := range [][]string{{"init"}, {"apply", m}} {
		if err := step(true, s...); err != nil {
			return err
		}
	}
	stop, err := demoServe(a)
	if err != nil {
		return err
	}
	defer stop()
	wf := "com.example/reminder.step@1"
	for _, s := range [][]string{
		{"send", "com.example/ReminderSet@1", `{"reminder_id":"r1","text":"stretch","delay_ms":300}`, "--wait", "30s"},
		{"cells", "show", wf, "r1"},
		{"trace", wf, "r1"},
	} {
		if err := step(true, s...); err != nil {
			return err
		}
	}
	return stop()
}

// demoServe runs `aosd serve` on the demo's world in this process until
// the returned stop is called (it waits for the daemon to close the world);
// the commands run meanwhile reach the world through it, as they would a
// daemon started in another terminal.
func demoServe(a *app) (stop func() error, err error) {
	args := []string{"serve", "--world", a.world, "--listen", "127.0.0.1:0"}
	fmt.Fprintf(a.stdout, "\n$ aosd %s &\n", strings.Join(args, " "))
	ctx, cancel := context.WithCancel(a.ctx)
	pr, pw := io.Pipe()
	var logs bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, args, nil, pw, &logs)
		pw.Close()
	}()
	line, rerr := bufio.NewReader(pr).ReadString('\n')
	go io.Copy(io.Discard, pr)
	if rerr != nil {
		cancel()
		<-done
		return nil, fmt.Errorf("demo daemon did not start: %s", strings.TrimSpace(logs.String()))
	}
	fmt.Fprint(a.stdout, line)
	stopped := false
	var code int
	return func() error {
		if !stopped {
			stopped = true
			cancel()
			code = <-done
		}
		if code != exitOK {
			return fmt.Errorf("demo daemon exited with %d: %s", code, strings.TrimSpace(logs.String()))
		}
		return nil
	}, nil
}

// pathHint says how to run the commands above when no aosd is on PATH (the
// demo was started with go run).
func pathHint() string {
	if _, err := exec.LookPath("aosd"); err == nil {
		return ""
	}
	return "\naosd is not on your PATH. From the repository root:\n\n" +
		"    go install ./cmd/aosd                      # into $(go env GOPATH)/bin, or $GOBIN if set\n" +
		"    export PATH=\"$(go env GOPATH)/bin:$PATH\"  # if that directory is not on PATH yet\n\n" +
		"or write go run ./cmd/aosd wherever the commands say aosd.\n"
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, s := range args {
		if strings.ContainsAny(s, ` "{}'`) {
			s = "'" + s + "'"
		}
		out[i] = s
	}
	return out
}
