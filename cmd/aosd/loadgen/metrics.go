package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// sample is the unlabelled samples of a Prometheus text page, by name
// (labelled samples are left out: the figures bench reads have none).
type sample map[string]float64

// parseMetrics reads the Prometheus text exposition format's unlabelled
// samples; comments and labelled samples are skipped.
func parseMetrics(b []byte) sample {
	s := sample{}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || line[0] == '#' || strings.ContainsRune(line, '{') {
			continue
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		v, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			continue
		}
		s[f[0]] = v
	}
	return s
}

// delta is after's name less before's; false if either lacks it.
func (after sample) delta(before sample, name string) (float64, bool) {
	a, ok1 := after[name]
	b, ok2 := before[name]
	return a - b, ok1 && ok2
}

// metrics scrapes GET /metrics.
func (g *gen) metrics(ctx context.Context) (sample, error) {
	b, status, err := g.do(ctx, "GET", "/metrics", nil)
	if err != nil {
		return nil, err
	}
	if status != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: HTTP %d: %s", status, bytes.TrimSpace(b))
	}
	return parseMetrics(b), nil
}

// commits is the group commits between two scrapes; nil when the daemon
// exports no flush histograms.
func commits(before, after sample, events int) *Commits {
	n, ok1 := after.delta(before, "aos_journal_flush_records_count")
	recs, ok2 := after.delta(before, "aos_journal_flush_records_sum")
	secs, ok3 := after.delta(before, "aos_journal_flush_duration_seconds_sum")
	if !ok1 || !ok2 || !ok3 {
		return nil
	}
	c := &Commits{Flushes: uint64(n), Records: uint64(recs)}
	if n > 0 {
		c.MeanRecords = recs / n
		c.MeanFlushMs = secs * 1000 / n
		c.EventsPerFlsh = float64(events) / n
	}
	return c
}
