// Package metrics reads kube-proxy's Prometheus /metrics and names the
// metrics the diagnoses read.
package metrics

import (
	"fmt"
	"io"
	"math"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Metrics is kube-proxy's /metrics, parsed by Prometheus' own text parser.
type Metrics struct {
	Source   string
	Families map[string]*dto.MetricFamily
}

// Parse reads Prometheus text exposition format, within the caps on
// samples and labels (limits.go).
func Parse(r io.Reader, source string) (*Metrics, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	cr := &countingReader{r: r, source: source}
	fams, err := p.TextToMetricFamilies(cr)
	switch {
	case cr.err != nil:
		return nil, cr.err
	case cr.readErr != nil:
		return nil, cr.readErr
	}
	if err != nil {
		return nil, fmt.Errorf("%s: not Prometheus metrics: %w", source, err)
	}
	if len(fams) == 0 {
		return nil, fmt.Errorf("%s: no metrics found", source)
	}
	return &Metrics{Source: source, Families: fams}, nil
}

// Sample is one metric value with its labels.
type Sample struct {
	Labels map[string]string
	Value  float64
}

// Samples returns the samples of a gauge, counter or untyped metric.
func (m *Metrics) Samples(name string) []Sample {
	f := m.Families[name]
	if f == nil {
		return nil
	}
	var out []Sample
	for _, mt := range f.Metric {
		s := Sample{Labels: map[string]string{}}
		for _, l := range mt.Label {
			s.Labels[l.GetName()] = l.GetValue()
		}
		switch {
		case mt.Gauge != nil:
			s.Value = mt.Gauge.GetValue()
		case mt.Counter != nil:
			s.Value = mt.Counter.GetValue()
		case mt.Untyped != nil:
			s.Value = mt.Untyped.GetValue()
		case mt.Histogram != nil:
			s.Value = float64(mt.Histogram.GetSampleCount())
		default:
			continue
		}
		out = append(out, s)
	}
	return out
}

// Value returns the sample whose labels include all of labels.
func (m *Metrics) Value(name string, labels map[string]string) (float64, bool) {
	for _, s := range m.Samples(name) {
		match := true
		for k, v := range labels {
			if s.Labels[k] != v {
				match = false
				break
			}
		}
		if match {
			return s.Value, true
		}
	}
	return 0, false
}

// kube-proxy's metric names (pkg/proxy/metrics/metrics.go).
const (
	// Rule counts, iptables mode only.
	IPTablesTotal = "kubeproxy_sync_proxy_rules_iptables_total"
	IPTablesLast  = "kubeproxy_sync_proxy_rules_iptables_last"

	LastSync               = "kubeproxy_sync_proxy_rules_last_timestamp_seconds"
	LastQueued             = "kubeproxy_sync_proxy_rules_last_queued_timestamp_seconds"
	RestoreFailures        = "kubeproxy_sync_proxy_rules_iptables_restore_failures_total"
	PartialRestoreFailures = "kubeproxy_sync_proxy_rules_iptables_partial_restore_failures_total"
	NFTSyncFailures        = "kubeproxy_sync_proxy_rules_nftables_sync_failures_total"
	NFTCleanupFailures     = "kubeproxy_sync_proxy_rules_nftables_cleanup_failures_total"
	SyncDuration           = "kubeproxy_sync_proxy_rules_duration_seconds"
	FullSyncDuration       = "kubeproxy_sync_full_proxy_rules_duration_seconds"
)

// RuleCount is kube-proxy's own count of the rules of one table.
type RuleCount struct {
	// Family is IPv4/IPv6, or "" when the metric has no ip_family label
	// (kube-proxy before 1.33, where dual-stack values collide).
	Family  kubeproxy.Family
	Table   string
	Total   float64
	Last    float64
	HasLast bool
}

// RuleCounts returns the iptables rule-count metrics, per family and table.
func (m *Metrics) RuleCounts() []RuleCount {
	type key struct {
		family kubeproxy.Family
		table  string
	}
	byKey := map[key]*RuleCount{}
	var keys []key
	get := func(s Sample) *RuleCount {
		k := key{FamilyLabel(s.Labels["ip_family"]), s.Labels["table"]}
		if byKey[k] == nil {
			byKey[k] = &RuleCount{Family: k.family, Table: k.table}
			keys = append(keys, k)
		}
		return byKey[k]
	}
	for _, s := range m.Samples(IPTablesTotal) {
		get(s).Total = s.Value
	}
	for _, s := range m.Samples(IPTablesLast) {
		rc := get(s)
		rc.Last, rc.HasLast = s.Value, true
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].family != keys[j].family {
			return keys[i].family < keys[j].family
		}
		return keys[i].table < keys[j].table
	})
	out := make([]RuleCount, 0, len(keys))
	for _, k := range keys {
		out = append(out, *byKey[k])
	}
	return out
}

// FamilyLabel reads an ip_family label: "" when absent (kube-proxy < 1.33).
func FamilyLabel(v string) kubeproxy.Family {
	switch strings.ToLower(v) {
	case "ipv4", "4":
		return kubeproxy.IPv4
	case "ipv6", "6":
		return kubeproxy.IPv6
	}
	return ""
}

// More of kube-proxy's metric names, for sync health.
const (
	PartialSyncDuration       = "kubeproxy_sync_partial_proxy_rules_duration_seconds"
	NetworkProgramming        = "kubeproxy_network_programming_duration_seconds"
	EndpointChangesPending    = "kubeproxy_sync_proxy_rules_endpoint_changes_pending"
	ServiceChangesPending     = "kubeproxy_sync_proxy_rules_service_changes_pending"
	EndpointChangesTotal      = "kubeproxy_sync_proxy_rules_endpoint_changes_total"
	ServiceChangesTotal       = "kubeproxy_sync_proxy_rules_service_changes_total"
	NoLocalEndpointsTotal     = "kubeproxy_sync_proxy_rules_no_local_endpoints_total"
	HealthzTotal              = "kubeproxy_proxy_healthz_total"
	SyncDurationTopBucketSecs = 16.384 // 1 ms × 2^14: longer syncs all land in +Inf
)

// Newest is the latest of the sync timestamps the metrics carry
// (…_last_timestamp_seconds, …_last_queued_timestamp_seconds): a lower
// bound of when they were scraped. ok is false when they carry none.
func (m *Metrics) Newest() (t time.Time, ok bool) {
	var newest float64
	for _, name := range []string{LastSync, LastQueued} {
		for _, s := range m.Samples(name) {
			if s.Value > newest {
				newest, ok = s.Value, true
			}
		}
	}
	if !ok {
		return time.Time{}, false
	}
	sec, frac := math.Modf(newest)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC(), true
}

// Histogram is one histogram's count and sum, and how many observations
// fell above its largest finite bucket.
type Histogram struct {
	Labels map[string]string
	Count  uint64
	Sum    float64
	// Top is the largest finite bucket bound; AboveTop the observations
	// beyond it (in +Inf only).
	Top      float64
	AboveTop uint64
}

// Mean is Sum/Count, 0 without observations.
func (h Histogram) Mean() float64 {
	if h.Count == 0 {
		return 0
	}
	return h.Sum / float64(h.Count)
}

// Histograms returns the samples of a histogram metric.
func (m *Metrics) Histograms(name string) []Histogram {
	f := m.Families[name]
	if f == nil {
		return nil
	}
	var out []Histogram
	for _, mt := range f.Metric {
		hg := mt.GetHistogram()
		if hg == nil {
			continue
		}
		h := Histogram{Labels: map[string]string{}, Count: hg.GetSampleCount(), Sum: hg.GetSampleSum()}
		for _, l := range mt.Label {
			h.Labels[l.GetName()] = l.GetValue()
		}
		var below uint64
		for _, b := range hg.Bucket {
			if !math.IsInf(b.GetUpperBound(), 1) && b.GetUpperBound() >= h.Top {
				h.Top, below = b.GetUpperBound(), b.GetCumulativeCount()
			}
		}
		if h.Count > below {
			h.AboveTop = h.Count - below
		}
		out = append(out, h)
	}
	return out
}
