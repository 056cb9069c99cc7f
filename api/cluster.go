package api

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
)

// Roles of a node serving a world on PostgreSQL (ClusterStatus.Role).
const (
	RoleOwner   = "owner"   // holds the lease and runs the world
	RoleStandby = "standby" // forwards every request to the owner
)

// ForwardedHeader marks a request a standby forwarded to the node it took
// for the owner, naming the standby. A node that is not the owner (any
// more) refuses such a request with 503 instead of forwarding it again, so
// two nodes that each take the other for the owner (one stepped down a
// moment ago) never bounce a request between them.
const ForwardedHeader = "Aos-Forwarded-By"

// ClusterStatus is a node's view of the world's ownership: GET /v1/status
// carries it as "cluster" on a world served by several nodes (absent on a
// world one process serves alone).
type ClusterStatus struct {
	// Node is this node's identity (aosd serve --node).
	Node string `json:"node"`
	// Role is "owner" or "standby".
	Role string `json:"role"`
	// Owner and OwnerAddress name the holder of the lease as this node last
	// read it ("" when the lease is free), and where it serves.
	Owner        string `json:"owner"`
	OwnerAddress string `json:"owner_address"`
	// Epoch is the lease's epoch as this node last read it: each owner has
	// its own, one more than the owner's before.
	Epoch uint64 `json:"epoch"`
	// Address is where this node serves (aosd serve --advertise).
	Address string `json:"address"`
}

// ClusterMetrics are a node's Prometheus metrics about ownership. They live
// as long as the node, across its lives as owner and standby: register
// them with each registry that serves /metrics (Register).
type ClusterMetrics struct {
	Role      *prometheus.GaugeVec
	Epoch     prometheus.Gauge
	Takeovers prometheus.Counter
	StepDowns *prometheus.CounterVec
	Forwarded *prometheus.CounterVec
}

// NewClusterMetrics makes a node's metrics.
func NewClusterMetrics() *ClusterMetrics {
	return &ClusterMetrics{
		Role: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "aos_cluster_role", Help: "1 for this node's role (owner or standby), 0 for the other.",
		}, []string{"role"}),
		Epoch: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "aos_cluster_epoch", Help: "The world's lease epoch as this node last read it.",
		}),
		Takeovers: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "aos_cluster_takeovers_total", Help: "Times this node took the lease and opened the world (failovers to it, and its first start).",
		}),
		StepDowns: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aos_cluster_stepdowns_total", Help: "Times this node stopped owning the world, by reason (fenced, failed, shutdown).",
		}, []string{"reason"}),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "aos_cluster_forwarded_total", Help: "Requests this standby forwarded to the owner, by outcome (ok, unreachable, no_owner, loop).",
		}, []string{"outcome"}),
	}
}

// Register adds the metrics to r.
func (m *ClusterMetrics) Register(r *prometheus.Registry) error {
	for _, c := range []prometheus.Collector{m.Role, m.Epoch, m.Takeovers, m.StepDowns, m.Forwarded} {
		if err := r.Register(c); err != nil {
			return err
		}
	}
	return nil
}

// SetRole sets the role gauge.
func (m *ClusterMetrics) SetRole(role string) {
	for _, r := range []string{RoleOwner, RoleStandby} {
		v := 0.0
		if r == role {
			v = 1
		}
		m.Role.WithLabelValues(r).Set(v)
	}
}

// WriteError answers an error body (docs/API.md, "Errors") with status and
// code, naming where: for a node that answers for the API without serving
// the world (a standby).
func WriteError(w http.ResponseWriter, status int, code, where, format string, args ...any) {
	writeError(w, newError(status, code, where, format, args...))
}
