package progress_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/aos-kernel/aos/internal/progress"
)

// lastFrame is what a terminal shows once the bar is finished: the text after
// the last carriage return, without the padding and the final newline.
func lastFrame(out string) string {
	return strings.TrimSpace(out[strings.LastIndex(out, "\r")+1:])
}

func TestDisabledWritesNothingAndAllocatesNothing(t *testing.T) {
	var buf bytes.Buffer
	for name, r := range map[string]*progress.Reporter{
		"disabled":          progress.New(&buf, false),
		"nil writer":        progress.New(nil, true),
		"nil reporter":      nil,
		"disabled, no file": progress.New(nil, false),
	} {
		t.Run(name, func(t *testing.T) {
			allocs := testing.AllocsPerRun(100, func() {
				b := r.Start("replay", 10)
				b.Add(1)
				b.Set(5)
				b.Finish()
			})
			if allocs != 0 {
				t.Errorf("a disabled Bar allocated %v times per use, want 0", allocs)
			}
			if buf.Len() != 0 {
				t.Errorf("a disabled Bar wrote %q", buf.String())
			}
		})
	}
}

func TestEnabledRendersLabelAndFinalCount(t *testing.T) {
	tests := []struct {
		name  string
		total uint64
		use   func(progress.Bar)
		want  []string
	}{
		{"add to the total", 1000, func(b progress.Bar) {
			for range 1000 {
				b.Add(1)
			}
		}, []string{"snapshot", "1000 / 1000", "100.00%"}},
		{"set to the total", 40, func(b progress.Bar) {
			b.Set(10)
			b.Set(40)
		}, []string{"snapshot", "40 / 40", "100.00%"}},
		{"stopped early shows where", 40, func(b progress.Bar) {
			b.Set(10)
		}, []string{"snapshot", "10 / 40", "25.00%"}},
		{"unknown total shows the count", 0, func(b progress.Bar) {
			b.Add(7)
			b.Add(5)
		}, []string{"snapshot", " 12 "}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			b := progress.New(&buf, true).Start("snapshot", tc.total)
			tc.use(b)
			b.Finish()
			out := buf.String()
			if !strings.HasSuffix(out, "\n") {
				t.Errorf("the finished bar does not end its line: %q", out)
			}
			frame := lastFrame(out)
			for _, w := range tc.want {
				if !strings.Contains(frame, w) {
					t.Errorf("final frame %q does not contain %q", frame, w)
				}
			}
			n := buf.Len()
			b.Add(1)
			b.Finish()
			if buf.Len() != n {
				t.Errorf("a finished Bar drew again: %q", buf.String()[n:])
			}
		})
	}
}

func TestConcurrentAddReachesExactTotal(t *testing.T) {
	const goroutines, each = 16, 5000
	var buf bytes.Buffer
	b := progress.New(&buf, true).Start("replay", goroutines*each)
	var wg sync.WaitGroup
	for range goroutines {
		wg.Go(func() {
			for range each {
				b.Add(1)
			}
		})
	}
	wg.Wait()
	b.Finish()
	want := fmt.Sprintf(" %d / %d ", goroutines*each, goroutines*each)
	if frame := lastFrame(buf.String()); !strings.Contains(frame, want) {
		t.Errorf("final frame %q does not contain %q", frame, want)
	}
}

func TestEnabledFalseOffATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	defer pw.Close()
	for name, f := range map[string]*os.File{"regular file": f, "pipe": pw, "nil": nil} {
		for _, json := range []bool{false, true} {
			if progress.Enabled(f, json) {
				t.Errorf("Enabled(%s, json=%v) = true, want false", name, json)
			}
		}
	}
}

// The kernel may call Add once per record: these show what that costs with
// the bars off and on.
func BenchmarkAdd(b *testing.B) {
	for name, enabled := range map[string]bool{"disabled": false, "enabled": true} {
		b.Run(name, func(b *testing.B) {
			var buf bytes.Buffer
			bar := progress.New(&buf, enabled).Start("replay", 0)
			for b.Loop() {
				bar.Add(1)
			}
			bar.Finish()
		})
	}
}
