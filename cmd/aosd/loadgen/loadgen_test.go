package loadgen

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

func goodConfig() Config {
	return Config{Base: "http://127.0.0.1:1", Events: 10, Batch: 1, Concurrency: 1, Keys: 1, KeyPrefix: "k-", Settle: time.Second}
}

func TestConfigCheck(t *testing.T) {
	if err := (&Config{}).Check(); err == nil {
		t.Fatal("empty config accepted")
	}
	g := goodConfig()
	if err := g.Check(); err != nil {
		t.Fatalf("good config refused: %v", err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"events", func(c *Config) { c.Events = 0 }, "--events 0"},
		{"warmup", func(c *Config) { c.Warmup = -1 }, "--warmup -1"},
		{"batch", func(c *Config) { c.Batch = 0 }, "--batch 0"},
		{"batch-big", func(c *Config) { c.Batch = 10_001 }, "--batch 10001"},
		{"concurrency", func(c *Config) { c.Concurrency = 0 }, "--concurrency 0"},
		{"keys", func(c *Config) { c.Keys = 0 }, "--keys 0"},
		{"prefix-quote", func(c *Config) { c.KeyPrefix = `a"b` }, `--key-prefix "a\"b"`},
		{"prefix-empty", func(c *Config) { c.KeyPrefix = "" }, `--key-prefix ""`},
		{"settle", func(c *Config) { c.Settle = 0 }, "--settle 0s"},
		{"template-constant", func(c *Config) { c.Template = []byte(`{"schema":"a/B@1","value":1}`) }, "neither {{key}} nor {{seq}}"},
		{"template-not-json", func(c *Config) { c.Template = []byte(`{"schema":{{key}}}`) }, "not a JSON object"},
		{"effects-and-template", func(c *Config) { c.Effects, c.Template = true, []byte(`{"schema":"a/B@1","value":"{{key}}"}`) }, "--effects and --template"},
		{"client", func(c *Config) { c.Client = "curl" }, `--client "curl": want lean`},
		{"template-no-value", func(c *Config) { c.Template = []byte(`{"schema":"{{key}}"}`) }, `want an event object`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := goodConfig()
			tc.edit(&c)
			err := c.Check()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

func TestFill(t *testing.T) {
	got := string(fill(nil, []byte(`{"k":"{{key}}","n":{{seq}},"x":"{{other}}{{"}`), "k-7", 42))
	want := `{"k":"k-7","n":42,"x":"{{other}}{{"}`
	if got != want {
		t.Fatalf("fill = %s, want %s", got, want)
	}
}

func TestBody(t *testing.T) {
	g := &gen{c: Config{Keys: 3, KeyPrefix: "p", Batch: 2}}
	if got, want := string(g.body(nil, 4, 5)), `{"schema":"com.example/CountEvent@1","value":{"key":"p1","by":1}}`; got != want {
		t.Fatalf("one event: %s, want %s", got, want)
	}
	got := string(g.body(nil, 2, 4))
	want := `[{"schema":"com.example/CountEvent@1","value":{"key":"p2","by":1}},{"schema":"com.example/CountEvent@1","value":{"key":"p0","by":1}}]`
	if got != want {
		t.Fatalf("batch: %s, want %s", got, want)
	}
	g.c.Effects = true
	if got, want := string(g.body(nil, 7, 8)), `{"schema":"com.example/OrderCreated@1","value":{"order_id":"p7","amount_cents":100,"customer":"bench"}}`; got != want {
		t.Fatalf("effects: %s, want %s", got, want)
	}
	if g.orderIndex("p7") != 7 || g.orderIndex("q7") != -1 || g.orderIndex("px") != -1 {
		t.Fatal("orderIndex does not invert the order ids")
	}
	g.c.Effects = false
	g.c.Template = []byte(`{"schema":"a/B@1","value":{"id":"{{key}}","n":{{seq}}}}`)
	if got, want := string(g.body(nil, 5, 6)), `{"schema":"a/B@1","value":{"id":"p2","n":5}}`; got != want {
		t.Fatalf("template: %s, want %s", got, want)
	}
}

func TestSummarizeNearestRank(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		lat = append(lat, time.Duration(i)*time.Millisecond)
	}
	l := summarize(lat)
	if l.P50 != 50 || l.P90 != 90 || l.P99 != 99 || l.Max != 100 || l.Mean != 50.5 {
		t.Fatalf("summarize = %+v, want p50 50 p90 90 p99 99 max 100 mean 50.5", l)
	}
	if lat[0] != 100*time.Millisecond {
		t.Fatal("summarize sorted its input in place")
	}
	if one := summarize([]time.Duration{3 * time.Millisecond}); one.P50 != 3 || one.P99 != 3 {
		t.Fatalf("one latency: %+v", one)
	}
}

func TestMetricsAndCommits(t *testing.T) {
	page := func(cpu, flushes, recs, secs string) sample {
		return parseMetrics([]byte(`# HELP process_cpu_seconds_total x
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total ` + cpu + `
aos_steps_total{workflow="w",outcome="ok"} 99
aos_journal_flush_records_bucket{le="1"} 3
aos_journal_flush_records_sum ` + recs + `
aos_journal_flush_records_count ` + flushes + `
aos_journal_flush_duration_seconds_sum ` + secs + `
`))
	}
	before, after := page("1.5", "10", "40", "0.01"), page("3.75", "30", "240", "0.05")
	if d, ok := after.delta(before, "process_cpu_seconds_total"); !ok || d != 2.25 {
		t.Fatalf("cpu delta = %v %v, want 2.25", d, ok)
	}
	if _, ok := after.delta(before, "aos_steps_total"); ok {
		t.Fatal("a labelled sample was read as unlabelled")
	}
	c := commits(before, after, 100)
	if c == nil || c.Flushes != 20 || c.Records != 200 || c.MeanRecords != 10 || c.EventsPerFlsh != 5 || c.MeanFlushMs != 2 {
		t.Fatalf("commits = %+v", c)
	}
	if commits(sample{}, after, 100) != nil {
		t.Fatal("commits from a page without the histograms")
	}
}

func TestVerifySeqs(t *testing.T) {
	for _, tc := range []struct {
		name string
		seqs []uint64
		want string
	}{
		{"twice", []uint64{1, 2, 2}, "3 events sent, 2 distinct seqs answered (1 answered twice)"},
		{"missing", []uint64{1, 2}, "3 events sent, 2 distinct seqs answered (0 answered twice)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Nothing listens at the base: a verification that got past the
			// seqs would fail on its first request instead.
			g := &gen{c: Config{Events: 2, Warmup: 1, Settle: time.Second, Base: "http://127.0.0.1:1"},
				http: &http.Client{}, base: "http://127.0.0.1:1", seen: map[uint64]struct{}{}}
			g.record(tc.seqs)
			v := g.verify(context.Background())
			if v.OK || v.Problem != tc.want {
				t.Fatalf("verify = %+v, want problem %q", v, tc.want)
			}
		})
	}
}
