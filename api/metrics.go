package api

import (
	"context"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/aos-kernel/aos/kernel"
)

// Metrics is a kernel.Observer that feeds Prometheus, plus collectors that
// read the world's status and cell stores on every scrape.
type Metrics struct {
	Registry *prometheus.Registry

	eventsIn     prometheus.Counter
	steps        *prometheus.CounterVec
	stepLatency  *prometheus.HistogramVec
	flushLatency prometheus.Histogram
	flushBatch   prometheus.Histogram
	flushErrors  prometheus.Counter
	snapTotal    prometheus.Histogram
	snapPause    prometheus.Histogram
	snapBytes    prometheus.Gauge
	snapHolds    prometheus.Counter
}

var (
	_ kernel.Observer     = (*Metrics)(nil)
	_ kernel.TailObserver = (*Metrics)(nil)
)

// NewMetrics builds the registry with the observer's metrics and the Go and
// process collectors. Call Watch once the world is open.
func NewMetrics() *Metrics {
	m := &Metrics{
		Registry: prometheus.NewRegistry(),
		eventsIn: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aos_events_ingested_total", Help: "Domain events journaled at ingress (external and emitted).",
		}),
		steps: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aos_steps_total", Help: "Workflow steps run, by workflow and outcome.",
		}, []string{"workflow", "outcome"}),
		stepLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "aos_step_duration_seconds", Help: "Wall time of one workflow step.",
			Buckets: prometheus.ExponentialBuckets(1e-6, 4, 12),
		}, []string{"workflow"}),
		flushLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "aos_journal_flush_duration_seconds", Help: "Wall time of one group commit (journal append + fsync).",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 12),
		}),
		flushBatch: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "aos_journal_flush_records", Help: "Records per group commit.",
			Buckets: prometheus.ExponentialBuckets(1, 4, 10),
		}),
		flushErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aos_journal_flush_errors_total", Help: "Group commits that failed (the world stops accepting work).",
		}),
		snapTotal: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "aos_snapshot_duration_seconds", Help: "Wall time from a snapshot's checkpoint until its record is durable.",
			Buckets: prometheus.ExponentialBuckets(1e-3, 4, 10),
		}),
		snapPause: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "aos_snapshot_pause_seconds", Help: "Wall time the loop spent on a snapshot: copying its tables at the checkpoint, installing the written cells at the end.",
			Buckets: prometheus.ExponentialBuckets(1e-5, 4, 12),
		}),
		snapBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aos_snapshot_bytes", Help: "Size of the last snapshot object.",
		}),
		snapHolds: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aos_snapshot_holds_total", Help: "Loop turns held for a snapshot still being written, because the records since the newest journaled snapshot reached the tail bound (SnapshotMaxTail): a snapshot slower than ingest.",
		}),
	}
	m.Registry.MustRegister(m.eventsIn, m.steps, m.stepLatency, m.flushLatency, m.flushBatch, m.flushErrors,
		m.snapTotal, m.snapPause, m.snapBytes, m.snapHolds,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// Ingested implements kernel.Observer.
func (m *Metrics) Ingested(events int) { m.eventsIn.Add(float64(events)) }

// Stepped implements kernel.Observer.
func (m *Metrics) Stepped(workflow string, d time.Duration, failed bool) {
	outcome := "ok"
	if failed {
		outcome = "failed"
	}
	m.steps.WithLabelValues(workflow, outcome).Inc()
	m.stepLatency.WithLabelValues(workflow).Observe(d.Seconds())
}

// Flushed implements kernel.Observer.
func (m *Metrics) Flushed(records int, d time.Duration, err error) {
	if err != nil {
		m.flushErrors.Inc()
		return
	}
	m.flushLatency.Observe(d.Seconds())
	m.flushBatch.Observe(float64(records))
}

// Watch registers the collectors that query w on every scrape.
func (m *Metrics) Watch(w *kernel.World) {
	m.Registry.MustRegister(&worldCollector{w: w})
}

type worldCollector struct{ w *kernel.World }

var (
	descHeight    = prometheus.NewDesc("aos_journal_height", "Last durable journal sequence.", nil, nil)
	descQuiescent = prometheus.NewDesc("aos_quiescent", "1 when the world is quiescent.", nil, nil)
	descInstances = prometheus.NewDesc("aos_instances", "Instances by status.", []string{"status"}, nil)
	descInflight  = prometheus.NewDesc("aos_inflight_intents", "Effect intents in flight.", nil, nil)
	descQueued    = prometheus.NewDesc("aos_queued_effects", "Effects queued for executors.", nil, nil)
	descParked    = prometheus.NewDesc("aos_parked_events", "Events parked for instances that cannot take them now (failed, or their module set aside).", nil, nil)
	descAside     = prometheus.NewDesc("aos_modules_set_aside", "Modules set aside because their steps kept timing out.", nil, nil)
	descAsideWait = prometheus.NewDesc("aos_module_parked_inputs", "Per module set aside, the parked inputs a resume would deliver.", []string{"module"}, nil)
	descCells     = prometheus.NewDesc("aos_cells", "Cells per workflow.", []string{"workflow"}, nil)
	descResident  = prometheus.NewDesc("aos_cells_resident", "Cells held in memory per workflow (dirty resident + hot cache).", []string{"workflow"}, nil)
	descHits      = prometheus.NewDesc("aos_cell_cache_hits_total", "Cell reads answered by the hot cache.", []string{"workflow"}, nil)
	descMisses    = prometheus.NewDesc("aos_cell_cache_misses_total", "Cell reads that went to the index.", []string{"workflow"}, nil)
	descHitRatio  = prometheus.NewDesc("aos_cell_cache_hit_ratio", "Hot cache hits / (hits + misses) since start.", []string{"workflow"}, nil)
	descVBatches  = prometheus.NewDesc("aos_receipt_verify_batches_total", "Batches of receipt signatures verified together.", nil, nil)
	descVReceipts = prometheus.NewDesc("aos_receipt_verify_receipts_total", "Receipts whose signatures were verified in batches (divided by batches: mean batch size).", nil, nil)
)

func (c *worldCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descHeight, descQuiescent, descInstances, descInflight, descQueued, descParked, descAside, descAsideWait,
		descCells, descResident, descHits, descMisses, descHitRatio, descVBatches, descVReceipts} {
		ch <- d
	}
}

func (c *worldCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := c.w.Status(ctx); err == nil {
		ch <- prometheus.MustNewConstMetric(descHeight, prometheus.GaugeValue, float64(st.JournalHeight))
		q := 0.0
		if st.Quiescent {
			q = 1
		}
		ch <- prometheus.MustNewConstMetric(descQuiescent, prometheus.GaugeValue, q)
		for s, n := range map[string]int{"running": st.Instances.Running, "waiting": st.Instances.Waiting,
			"completed": st.Instances.Completed, "failed": st.Instances.Failed, "parked": st.Instances.Parked} {
			ch <- prometheus.MustNewConstMetric(descInstances, prometheus.GaugeValue, float64(n), s)
		}
		ch <- prometheus.MustNewConstMetric(descParked, prometheus.GaugeValue, float64(st.Parked))
		ch <- prometheus.MustNewConstMetric(descAside, prometheus.GaugeValue, float64(len(st.Aside)))
		for _, m := range st.Aside {
			ch <- prometheus.MustNewConstMetric(descAsideWait, prometheus.GaugeValue, float64(m.Waiting), m.Name)
		}
		ch <- prometheus.MustNewConstMetric(descInflight, prometheus.GaugeValue, float64(st.Inflight))
		ch <- prometheus.MustNewConstMetric(descQueued, prometheus.GaugeValue, float64(st.QueuedEffects))
	}
	vb, vr := c.w.ReceiptVerifyStats()
	ch <- prometheus.MustNewConstMetric(descVBatches, prometheus.CounterValue, float64(vb))
	ch <- prometheus.MustNewConstMetric(descVReceipts, prometheus.CounterValue, float64(vr))
	stats, err := c.w.CellStats(ctx)
	if err != nil {
		return
	}
	for _, s := range stats {
		ch <- prometheus.MustNewConstMetric(descCells, prometheus.GaugeValue, float64(s.Cells), s.Workflow)
		ch <- prometheus.MustNewConstMetric(descResident, prometheus.GaugeValue, float64(s.Resident+s.CacheLen), s.Workflow)
		ch <- prometheus.MustNewConstMetric(descHits, prometheus.CounterValue, float64(s.CacheHits), s.Workflow)
		ch <- prometheus.MustNewConstMetric(descMisses, prometheus.CounterValue, float64(s.CacheMisses), s.Workflow)
		ratio := 0.0
		if t := s.CacheHits + s.CacheMisses; t > 0 {
			ratio = float64(s.CacheHits) / float64(t)
		}
		ch <- prometheus.MustNewConstMetric(descHitRatio, prometheus.GaugeValue, ratio, s.Workflow)
	}
}

// SnapshotHolding implements kernel.TailObserver.
func (m *Metrics) SnapshotHolding(_, _ uint64) { m.snapHolds.Inc() }

// Snapshotted implements kernel.Observer.
func (m *Metrics) Snapshotted(pause, total time.Duration, bytes int) {
	m.snapPause.Observe(pause.Seconds())
	m.snapTotal.Observe(total.Seconds())
	m.snapBytes.Set(float64(bytes))
}
