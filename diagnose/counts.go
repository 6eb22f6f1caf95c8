package diagnose

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/metrics"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Rule counting as kube-proxy's iptables proxier does it for
// kubeproxy_sync_proxy_rules_iptables_total (pkg/proxy/iptables/proxier.go,
// 1.37.2):
//
//	iptables_total{table="filter"} = filterRules.Lines()
//	iptables_total{table="nat"}    = natRules.Lines() + skippedNatRules.Lines() - deletedChains
//
// One line per `-A` rule kube-proxy writes into its own chains: KUBE-SERVICES,
// KUBE-NODEPORTS, KUBE-POSTROUTING, KUBE-MARK-MASQ and the per-service
// KUBE-SVC/SVL/EXT/FW/SEP chains in nat; KUBE-SERVICES,
// KUBE-EXTERNAL-SERVICES, KUBE-FORWARD, KUBE-NODEPORTS, KUBE-PROXY-FIREWALL
// in filter, plus the IPv4 KUBE-FIREWALL rule when localhostNodePorts is in
// effect. Not counted: chain declarations, the jumps from built-in chains
// (EnsureRule), the canaries, the kubelet's rules, and the rules of stale
// chains kube-proxy has not deleted yet (large-cluster mode deletes them at
// most once per syncPeriod). The gauges are set before iptables-restore
// runs, so a failed restore still updates them.

// ChainRef names a chain of one table.
type ChainRef struct {
	Family kubeproxy.Family
	Table  string
	Chain  string
}

// ChainSet is a set of chains, e.g. those called stale; nil is empty.
type ChainSet map[ChainRef]bool

// Has reports whether the set holds the chain.
func (s ChainSet) Has(fam kubeproxy.Family, table, chain string) bool {
	return s[ChainRef{fam, table, chain}]
}

// hasKubeProxyChains reports whether an iptables table holds any chain
// kube-proxy's iptables proxier writes.
func hasKubeProxyChains(t *inspect.IPTable) bool {
	for _, c := range t.Chains {
		if !strings.HasPrefix(c.Name, kubeproxy.PrefixKube) {
			continue
		}
		if kubeproxy.CountedChain(kubeproxy.TableNAT, c.Name) || kubeproxy.CountedChain(kubeproxy.TableFilter, c.Name) || kubeproxy.IsServiceChainName(c.Name) {
			return true
		}
	}
	return false
}

// countedChain reports whether kube-proxy counts the rules of chain in a
// table named table of family fam.
func countedChain(table string, fam kubeproxy.Family, chain string, localhostNodePorts bool) bool {
	switch table {
	case kubeproxy.TableNAT:
		return kubeproxy.CountedChain(table, chain) || kubeproxy.IsServiceChainName(chain)
	case kubeproxy.TableFilter:
		if chain == kubeproxy.ChainFirewall {
			// written (and counted) by kube-proxy only for IPv4 with
			// localhostNodePorts in effect; the kubelet writes the same
			// rule otherwise, uncounted
			return fam != kubeproxy.IPv6 && localhostNodePorts
		}
		return kubeproxy.CountedChain(table, chain)
	}
	return false
}

// KubeProxyRuleCount counts the rules of t that kube-proxy's iptables_total
// metric counts for that table. Rules of chains in stale are counted apart,
// in staleRules. localhostNodePorts is the effective setting, which decides
// whether the IPv4 filter table's KUBE-FIREWALL rule is kube-proxy's
// (LocalhostNodePortsFromDump reads it off the nat table). Tables other than
// nat and filter give 0, 0.
func KubeProxyRuleCount(t *inspect.IPTable, stale ChainSet, localhostNodePorts bool) (counted int, staleRules int) {
	if t == nil {
		return 0, 0
	}
	for _, c := range t.Chains {
		if c == nil || c.Deleted || !countedChain(t.Name, t.Family, c.Name, localhostNodePorts) {
			continue
		}
		if stale.Has(t.Family, t.Name, c.Name) {
			staleRules += len(c.Rules)
			continue
		}
		counted += len(c.Rules)
	}
	return counted, staleRules
}

// LocalhostNodePortsFromDump reads whether kube-proxy's localhostNodePorts
// is in effect off a nat table: the final KUBE-SERVICES → KUBE-NODEPORTS
// rule excludes 127.0.0.0/8 when it is off (IPv4), and per-IP nodeport
// rules include a 127.x address only when it is on. nil when the table
// does not say.
func LocalhostNodePortsFromDump(nat *inspect.IPTable) (on *bool, evidence string) {
	if nat == nil || nat.Family == kubeproxy.IPv6 {
		return nil, ""
	}
	c := nat.Chain(kubeproxy.ChainServices)
	if c == nil {
		return nil, ""
	}
	yes, no := true, false
	sawPerIP := false
	for _, r := range c.Rules {
		if r.Target != kubeproxy.ChainNodePorts {
			continue
		}
		d := r.Destination()
		switch {
		case !d.Set():
			return &yes, "the KUBE-SERVICES → KUBE-NODEPORTS rule does not exclude 127.0.0.0/8"
		case d.Not && strings.HasPrefix(d.Value, "127."):
			return &no, "the KUBE-SERVICES → KUBE-NODEPORTS rule excludes " + d.Value
		case !d.Not:
			sawPerIP = true
			if ip := net.ParseIP(strings.SplitN(d.Value, "/", 2)[0]); ip != nil && ip.IsLoopback() {
				return &yes, "a KUBE-SERVICES → KUBE-NODEPORTS rule matches " + d.Value
			}
		}
	}
	if sawPerIP {
		return &no, "the per-IP KUBE-SERVICES → KUBE-NODEPORTS rules (nodePortAddresses) include no loopback address"
	}
	return nil, ""
}

// CountOptions tunes CompareCounts.
type CountOptions struct {
	// SyncPeriod is kube-proxy's syncPeriod (default 30s): a sync queued
	// for more than twice that without succeeding is hung (kube-proxy's
	// /healthz turns 503 at that point).
	SyncPeriod time.Duration
	// LocalhostNodePorts, when set, overrides what the nat table says
	// about localhostNodePorts (kpconfig.Config.LocalhostNodePortsEffective).
	LocalhostNodePorts *bool
	// Earlier is an earlier scrape of the same kube-proxy's metrics, to
	// tell the recent sync durations from the lifetime means.
	Earlier *metrics.Metrics
}

// CountsReport compares kube-proxy's own rule counts (its metrics) with the
// rules in a dump. Its JSON form is stable: fields are only added.
type CountsReport struct {
	// Mode is the proxy mode: from the metrics when they say, else from the
	// dump: iptables, nftables, ipvs or unknown. ModeFromMetrics and
	// ModeFromDump say what each source shows ("" when it shows nothing;
	// "iptables+nftables" when the dump holds both).
	Mode            kubeproxy.Mode `json:"mode"`
	ModeFromMetrics kubeproxy.Mode `json:"modeFromMetrics,omitempty"`
	ModeFromDump    kubeproxy.Mode `json:"modeFromDump,omitempty"`
	// Tables has one row per kube-proxy iptables table in the dump and per
	// (family, table) the metrics count. Empty in nftables mode.
	Tables []TableCount `json:"tables"`
	// LargeClusterMode is what the dump shows of iptables large-cluster mode.
	LargeClusterMode LargeClusterEvidence `json:"largeClusterMode"`
	// LastSync has one entry per family of the sync timestamps.
	LastSync []SyncState `json:"lastSync"`
	// Failures lists the failure counters above zero.
	Failures []FailureCount `json:"failures"`
	// PendingEndpointChanges / PendingServiceChanges: changes kube-proxy
	// has seen and not synced yet (both families together).
	PendingEndpointChanges *float64 `json:"pendingEndpointChanges,omitempty"`
	PendingServiceChanges  *float64 `json:"pendingServiceChanges,omitempty"`
	Notes                  []string `json:"notes"`
	// IPVS counts the virtual servers against the Service ports' frontends
	// when an IPVS table was read (ipvs_counts.go).
	IPVS *IPVSCountsReport `json:"ipvs,omitempty"`
}

// TableCount compares one table.
type TableCount struct {
	Family  kubeproxy.Family  `json:"family"`
	Table   string            `json:"table"`
	Backend kubeproxy.Backend `json:"backend,omitempty"`
	Source  string            `json:"source,omitempty"`
	// Metric is iptables_total for the table, MetricLast iptables_last (the
	// rules written by the last restore: less than Metric after a partial
	// sync); null when the metrics do not have it.
	Metric     *float64 `json:"metric"`
	MetricLast *float64 `json:"metricLast"`
	// MetricUnlabeled: the metric has no ip_family label (kube-proxy
	// < 1.33), so in dual-stack both families' proxiers wrote it.
	MetricUnlabeled bool `json:"metricUnlabeled,omitempty"`
	// InDump: the table is in the dump. Actual counts its rules the way
	// kube-proxy does, without stale chains; StaleRules are the rules of
	// the StaleChains chains the caller called stale.
	InDump      bool `json:"inDump"`
	Actual      int  `json:"actual"`
	StaleRules  int  `json:"staleRules"`
	StaleChains int  `json:"staleChains"`
	// Present is every rule of the table in the dump (what
	// `iptables-save | grep -c '^-A'` counts for it): Actual + StaleRules +
	// BuiltinJumps + Others.
	Present int `json:"present"`
	// BuiltinJumps are the jumps from the built-in chains to kube-proxy's
	// (which it creates with EnsureRule and does not count); Others are the
	// rest: the kubelet's, other components', canaries have none.
	BuiltinJumps int `json:"builtinJumps"`
	Others       int `json:"others"`
	// Difference is Actual − Metric (positive: more rules in the kernel
	// than kube-proxy counted); null when there is nothing to compare.
	Difference *int `json:"difference"`
	// Compared: the dump's table and the metric were both there; when not,
	// NotCompared says why and Agree means nothing.
	Compared    bool   `json:"compared"`
	NotCompared string `json:"notCompared,omitempty"`
	Agree       bool   `json:"agree"`
	// Reason explains a difference, or what it took to agree.
	Reason string `json:"reason,omitempty"`
	// UnreferencedChains are per-service nat chains no kube-proxy chain
	// reaches any more (from KUBE-SERVICES / KUBE-NODEPORTS through the
	// jumps), not called stale; UnreferencedRules are their rules. They are
	// what stale chains look like without the API objects.
	UnreferencedChains int `json:"unreferencedChains,omitempty"`
	UnreferencedRules  int `json:"unreferencedRules,omitempty"`
	// Suspects are rules in kube-proxy's chains that kube-proxy does not
	// write (another writer's), at most 10.
	Suspects []RuleRef `json:"suspects,omitempty"`
	// LocalhostNodePorts is the setting the KUBE-FIREWALL decision used
	// (IPv4 filter only), with where it came from.
	LocalhostNodePorts       *bool  `json:"localhostNodePorts,omitempty"`
	LocalhostNodePortsSource string `json:"localhostNodePortsSource,omitempty"`
}

// LargeClusterEvidence is what comments in the dump say about iptables
// large-cluster mode (more than 1000 endpoints: kube-proxy drops the
// comments of KUBE-SEP rules and SVC→SEP jumps, keeps all others). The
// endpoint count from the API objects settles it; the caller adds that.
type LargeClusterEvidence struct {
	// FromDump: true when some family's dump shows large-cluster mode,
	// false when every family that can tell shows small-cluster mode, null
	// when none can tell.
	FromDump *bool                `json:"fromDump"`
	Evidence string               `json:"evidence"`
	ByFamily []LargeClusterFamily `json:"byFamily,omitempty"`
}

// LargeClusterFamily is the evidence of one family's nat table.
type LargeClusterFamily struct {
	Family   kubeproxy.Family `json:"family"`
	FromDump *bool            `json:"fromDump"`
	Evidence string           `json:"evidence"`
	// EndpointRules are the rules of KUBE-SEP chains, Jumps the SVC/SVL →
	// SEP jumps, ServiceRules the nat KUBE-SERVICES rules; *Commented
	// count those with a comment.
	EndpointRules          int `json:"endpointRules"`
	EndpointRulesCommented int `json:"endpointRulesCommented"`
	Jumps                  int `json:"jumps"`
	JumpsCommented         int `json:"jumpsCommented"`
	ServiceRules           int `json:"serviceRules"`
	ServiceRulesCommented  int `json:"serviceRulesCommented"`
}

// SyncState is one family's sync timestamps.
type SyncState struct {
	// Family is "" when the metrics have no ip_family label (< 1.33).
	Family     kubeproxy.Family `json:"family"`
	LastSync   *time.Time       `json:"lastSync"`
	LastQueued *time.Time       `json:"lastQueued"`
	// Ages relative to the now given; null without one.
	LastSyncAgeSeconds   *float64 `json:"lastSyncAgeSeconds"`
	LastQueuedAgeSeconds *float64 `json:"lastQueuedAgeSeconds"`
	// Pending: a sync was queued after the last successful one.
	Pending bool `json:"pending"`
	// Hung: queued but not synced for more than twice syncPeriod (what
	// kube-proxy's /healthz calls unhealthy), or no successful sync for
	// longer than kube-proxy's hourly maximum interval.
	Hung   bool   `json:"hung"`
	Reason string `json:"reason,omitempty"`
	// Slow: a sync is queued past 2 × syncPeriod, but kube-proxy's syncs
	// take about that long: most likely one is still running.
	Slow bool `json:"slow,omitempty"`

	// From the duration histograms (sum/count: kube-proxy's buckets end at
	// about 16 s, so longer syncs only show in the mean and in LongSyncs).
	Syncs                  uint64  `json:"syncs"`
	MeanSyncSeconds        float64 `json:"meanSyncSeconds"`
	FullSyncs              uint64  `json:"fullSyncs"`
	MeanFullSyncSeconds    float64 `json:"meanFullSyncSeconds,omitempty"`
	PartialSyncs           uint64  `json:"partialSyncs"`
	MeanPartialSyncSeconds float64 `json:"meanPartialSyncSeconds,omitempty"`
	LongSyncs              uint64  `json:"longSyncs,omitempty"`
	// Between two scrapes of the metrics, when two were given.
	RecentSyncs           *uint64  `json:"recentSyncs,omitempty"`
	RecentMeanSyncSeconds *float64 `json:"recentMeanSyncSeconds,omitempty"`
	// Network programming latency: from an EndpointSlice change to the
	// rules (its buckets end at 5 min).
	Programmed             uint64  `json:"programmed,omitempty"`
	MeanProgrammingSeconds float64 `json:"meanProgrammingSeconds,omitempty"`
	LongProgramming        uint64  `json:"longProgramming,omitempty"`
}

// FailureCount is a failure counter above zero.
type FailureCount struct {
	Metric  string           `json:"metric"`
	Family  kubeproxy.Family `json:"family"`
	Value   float64          `json:"value"`
	Meaning string           `json:"meaning"`
	// A counter only grows: its value is kube-proxy's lifetime, not its
	// state. Now says what it means at present: FailingNow (it grew
	// between two scrapes; no sync succeeded since kube-proxy started; a
	// sync is queued past 2 × syncPeriod), Recovered (it did not grow
	// between two scrapes; the last sync succeeded after the last one
	// queued) or Unknown (a sync is queued and has not run yet); Evidence
	// says which. SinceEarlier is its growth between two scrapes.
	Now          string   `json:"now"`
	Evidence     string   `json:"evidence"`
	SinceEarlier *float64 `json:"sinceEarlier,omitempty"`
}

// What a failure counter means at present (FailureCount.Now).
const (
	FailingNow = "failing"
	Recovered  = "recovered"
	Unknown    = "unknown"
)

const (
	maxSuspects = 10
)

var failureMeanings = map[string]string{
	metrics.RestoreFailures:        "iptables-restore failed; kube-proxy sets iptables_total before the restore runs, so the metric counts rules that never reached the kernel, and it retries with a full sync",
	metrics.PartialRestoreFailures: "an iptables-restore of a partial sync failed and kube-proxy fell back to a full sync",
	metrics.NFTSyncFailures:        "an nftables transaction failed; kube-proxy retries with a full sync",
	metrics.NFTCleanupFailures:     "deleting stale nftables chains failed; they linger until a later sync deletes them",
}

// CompareCounts compares the iptables rule-count metrics with the dump.
// stale (may be nil) holds the chains called stale; now (may be zero) is
// when the metrics were scraped. Either rs or m may be nil; it never fails.
func CompareCounts(rs *inspect.Ruleset, m *metrics.Metrics, stale ChainSet, now time.Time, opts CountOptions) CountsReport {
	if rs == nil {
		rs = &inspect.Ruleset{}
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = kubeproxy.DefaultSyncPeriod
	}
	rep := CountsReport{Tables: []TableCount{}, LastSync: []SyncState{}, Failures: []FailureCount{}, Notes: []string{}, LargeClusterMode: largeClusterEvidence(rs)}
	rep.detectMode(rs, m)
	if m == nil {
		rep.note("no metrics given: nothing to compare the dump with")
	}
	rep.modeNotes(rs)

	states := syncStates(m, now, opts.SyncPeriod)
	failures := failuresByFamily(m, opts.Earlier, states)
	if rep.Mode == kubeproxy.ModeIPVS {
		ipvsFailureMeanings(failures)
	}
	rep.Failures = append(rep.Failures, failures...)

	if rep.Mode != kubeproxy.ModeIPVS && (rep.Mode == kubeproxy.ModeIPTables || rep.Mode == kubeproxy.ModeUnknown || rep.ModeFromDump.Has(kubeproxy.ModeIPTables)) {
		rep.Tables = compareTables(rs, m, stale, opts, failures, rep.Mode, rep.LargeClusterMode)
	}
	if m != nil && len(m.Samples(metrics.IPTablesTotal)) > 0 && !metricHasFamily(m, metrics.IPTablesTotal) {
		rep.note("the rule-count metrics have no ip_family label (kube-proxy < 1.33): in dual-stack the IPv4 and IPv6 proxiers overwrite one another's values, so each metric is whichever family synced last")
	}
	rep.leftoverNotes(rs)

	rep.LastSync = states
	if m != nil {
		if v, ok := m.Value(metrics.EndpointChangesPending, nil); ok {
			rep.PendingEndpointChanges = &v
		}
		if v, ok := m.Value(metrics.ServiceChangesPending, nil); ok {
			rep.PendingServiceChanges = &v
		}
	}
	syncDurations(rep.LastSync, m, opts.Earlier, opts.SyncPeriod)
	return rep
}

func (rep *CountsReport) note(format string, args ...any) {
	rep.Notes = append(rep.Notes, fmt.Sprintf(format, args...))
}

// detectMode sets the proxy mode, from the metrics when they say, else
// from the dump, and notes a dump of both modes.
func (rep *CountsReport) detectMode(rs *inspect.Ruleset, m *metrics.Metrics) {
	rep.ModeFromMetrics = ModeFromMetrics(m)
	if d := DetectMode(rs).Detected; d != kubeproxy.ModeUnknown {
		rep.ModeFromDump = d
	}
	rep.Mode = rep.ModeFromMetrics
	if rep.Mode == "" {
		rep.Mode = rep.ModeFromDump
	}
	if rep.ModeFromDump == kubeproxy.ModeBoth {
		switch rep.ModeFromMetrics {
		case kubeproxy.ModeNFTables:
			rep.note("the dump holds both iptables and nftables kube-proxy rules and the metrics say nftables mode: the iptables rules are leftovers of another mode (kube-proxy removes the other mode's rules only at startup)")
		case kubeproxy.ModeIPTables, kubeproxy.ModeIPVS:
			rep.note("the dump holds both iptables and nftables kube-proxy rules and the metrics say %s mode: the nftables table is a leftover of another mode (kube-proxy removes the other mode's rules only at startup)", rep.ModeFromMetrics)
		default:
			rep.note("the dump holds both iptables and nftables kube-proxy rules and no metrics say which mode runs: one set is leftovers of another mode (kube-proxy removes the other mode's rules only at startup)")
		}
	}
	if rep.Mode == "" || rep.Mode == kubeproxy.ModeBoth {
		rep.Mode = kubeproxy.ModeUnknown
	}
}

// modeNotes says when the metrics and the dump are of different modes,
// and that nftables and ipvs mode have no rule count to compare.
func (rep *CountsReport) modeNotes(rs *inspect.Ruleset) {
	metricsFamilyMode := rep.ModeFromMetrics
	if metricsFamilyMode == kubeproxy.ModeIPVS {
		metricsFamilyMode = kubeproxy.ModeIPTables // ipvs mode keeps iptables chains
	}
	if metricsFamilyMode != "" && rep.ModeFromDump != "" && !rep.ModeFromDump.Has(metricsFamilyMode) {
		rep.note("the metrics come from %s mode but the dump holds %s rules: the dump is of another node, or holds leftovers of another mode", rep.ModeFromMetrics, rep.ModeFromDump)
	}
	switch rep.Mode {
	case kubeproxy.ModeNFTables:
		rep.note("nftables mode exports no rule-count metric (kubeproxy_sync_proxy_rules_iptables_total exists only in iptables mode): there is nothing to compare the dump with; the sync timestamps and failure counters below still apply")
		for _, t := range rs.NFTables {
			if t != nil && t.IsKubeProxy() {
				rep.note("table %s kube-proxy: %d rules in %d chains, %d sets, %d maps", t.Family, t.RuleCount(), len(t.Chains), len(t.Sets), len(t.Maps))
			}
		}
	case kubeproxy.ModeIPVS:
		if rs.HasIPVS() {
			rep.note("ipvs mode exports no rule-count metric: the IPVS virtual servers are counted against the Service ports' frontends instead; the sync timestamps and failure counters still apply")
			break
		}
		rep.note("ipvs mode exports no rule-count metric: there is nothing to compare the dump with")
	}
}

// leftoverNotes says, per family, where rules kube-proxy does not count
// linger: the other iptables backend's chains, and KUBE-XLB chains of
// kube-proxy <= 1.23.
func (rep *CountsReport) leftoverNotes(rs *inspect.Ruleset) {
	backends := map[kubeproxy.Family]map[kubeproxy.Backend]bool{}
	xlb := map[kubeproxy.Family]int{}
	for _, t := range rs.IPTables {
		if t == nil || t.Name != kubeproxy.TableNAT {
			continue
		}
		if hasKubeProxyChains(t) {
			if backends[t.Family] == nil {
				backends[t.Family] = map[kubeproxy.Backend]bool{}
			}
			backends[t.Family][t.Backend] = true
		}
		for _, c := range t.Chains {
			if c != nil && strings.HasPrefix(c.Name, kubeproxy.PrefixXLB) {
				xlb[t.Family]++
			}
		}
	}
	for _, fam := range []kubeproxy.Family{kubeproxy.IPv4, kubeproxy.IPv6, ""} {
		if backends[fam][kubeproxy.BackendNFT] && backends[fam][kubeproxy.BackendLegacy] {
			rep.note("%s: kube-proxy chains exist in both iptables backends (nf_tables and legacy): only one is the running kube-proxy's, and the metrics count that one; the other is leftovers whose rules still act on packets (iptables-wrapper picks nft when the kubelet's KUBE-IPTABLES-HINT or KUBE-KUBELET-CANARY is in the nft mangle table)", familyOr(fam))
		} else if backends[fam][kubeproxy.BackendNFT] && legacyTablesWarned(rs, fam) {
			rep.note("%s: iptables-nft-save warns that iptables-legacy tables are present: an older kube-proxy's rules may linger there, uncounted and still acting on packets; dump them with iptables-legacy-save", familyOr(fam))
		}
		if xlb[fam] > 0 {
			rep.note("%s: %d KUBE-XLB chain(s) from kube-proxy <= 1.23 linger in nat: kube-proxy neither counts nor deletes them (KUBE-XLB- is not one of its prefixes); a KUBE-XLB chain that still jumps to a KUBE-SEP chain makes kube-proxy's restore fail when it deletes that endpoint", familyOr(fam), xlb[fam])
		}
	}
}

func metricHasFamily(m *metrics.Metrics, name string) bool {
	for _, s := range m.Samples(name) {
		if _, ok := s.Labels["ip_family"]; ok {
			return true
		}
	}
	return false
}

// failuresByFamily returns the failure counters above zero, each with
// what it means at present: from its growth since an earlier scrape, else
// from its family's sync timestamps.
func failuresByFamily(m, earlier *metrics.Metrics, states []SyncState) []FailureCount {
	if m == nil {
		return nil
	}
	var out []FailureCount
	for _, name := range []string{metrics.RestoreFailures, metrics.PartialRestoreFailures, metrics.NFTSyncFailures, metrics.NFTCleanupFailures} {
		for _, s := range m.Samples(name) {
			if s.Value > 0 {
				f := FailureCount{Metric: name, Family: metrics.FamilyLabel(s.Labels["ip_family"]), Value: s.Value, Meaning: failureMeanings[name]}
				f.Now, f.Evidence, f.SinceEarlier = failureNow(name, s, earlier, syncStateOf(states, f.Family))
				out = append(out, f)
			}
		}
	}
	return out
}

// syncStateOf is fam's sync state, or the only one there is (metrics
// without an ip_family label); nil when the metrics have none.
func syncStateOf(states []SyncState, fam kubeproxy.Family) *SyncState {
	for i := range states {
		if states[i].Family == fam {
			return &states[i]
		}
	}
	if len(states) == 1 {
		return &states[0]
	}
	return nil
}

// failureNow tells a counter's present from its lifetime.
func failureNow(name string, s metrics.Sample, earlier *metrics.Metrics, st *SyncState) (now, evidence string, since *float64) {
	if earlier != nil {
		if prev, ok := earlier.Value(name, s.Labels); ok {
			d := s.Value - prev
			switch {
			case d > 0:
				return FailingNow, fmt.Sprintf("it grew by %g between the two scrapes", d), &d
			case st == nil || !st.Pending:
				return Recovered, "it did not grow between the two scrapes", &d
			}
		}
	}
	switch {
	case st == nil:
		return Unknown, "no sync timestamps to tell whether it still fails: scrape the metrics twice", nil
	case st.LastSync == nil:
		return FailingNow, "no sync has succeeded since kube-proxy started", nil
	case st.Hung:
		return FailingNow, st.Reason, nil
	case !st.Pending:
		return Recovered, fmt.Sprintf("the last sync succeeded (%s), after the last one queued", st.LastSync.UTC().Format(time.RFC3339)), nil
	}
	return Unknown, "a sync is queued and has not run yet: scrape the metrics again to tell whether it fails", nil
}

// failuresFor adds up the failures of metric in fam that may bear on the
// rules now (a failure kube-proxy has recovered from does not).
func failuresFor(failures []FailureCount, fam kubeproxy.Family, metric string) float64 {
	n := 0.0
	for _, f := range failures {
		if f.Now != Recovered && f.Metric == metric && (f.Family == fam || f.Family == "") {
			n += f.Value
		}
	}
	return n
}

// compareTables builds the table rows: one per kube-proxy table in the
// dump, and one per table the metrics count that the dump lacks.
func compareTables(rs *inspect.Ruleset, m *metrics.Metrics, stale ChainSet, opts CountOptions, failures []FailureCount, mode kubeproxy.Mode, large LargeClusterEvidence) []TableCount {
	tr := tableRows{rows: []TableCount{}, rowsFor: map[tableKey][]int{}}
	lnp := localhostNodePortsByFamily(rs)
	for _, t := range rs.IPTables {
		if t == nil || (t.Name != kubeproxy.TableNAT && t.Name != kubeproxy.TableFilter) || !hasKubeProxyChains(t) {
			continue
		}
		k := tableKey{t.Family, t.Name}
		tr.rowsFor[k] = append(tr.rowsFor[k], len(tr.rows))
		tr.rows = append(tr.rows, dumpRow(t, stale, opts.LocalhostNodePorts, lnp[t.Family]))
	}
	if m != nil {
		for _, rc := range m.RuleCounts() {
			tr.addMetric(rc)
		}
	}
	rows := tr.rows
	for i := range rows {
		row := &rows[i]
		if !row.InDump {
			continue
		}
		explainRow(row, rows, failures, m, mode, rs, staleLinger(large, row.Family, opts.SyncPeriod))
		decideCompared(row, rs, m != nil)
	}
	sort.SliceStable(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		return a.Backend < b.Backend
	})
	return rows
}

// tableKey is a table by family and name.
type tableKey struct {
	fam   kubeproxy.Family
	table string
}

// tableRows are the rows being built, and which rows hold each table of
// the dump (one per backend and reading).
type tableRows struct {
	rows    []TableCount
	rowsFor map[tableKey][]int
}

// localhostNodePorts is what a nat table says of localhostNodePorts.
type localhostNodePorts struct {
	on  *bool
	why string
}

// localhostNodePortsByFamily is localhostNodePorts per family, from the
// first nat table that says.
func localhostNodePortsByFamily(rs *inspect.Ruleset) map[kubeproxy.Family]localhostNodePorts {
	lnp := map[kubeproxy.Family]localhostNodePorts{}
	for _, t := range rs.IPTables {
		if t == nil || t.Name != kubeproxy.TableNAT || lnp[t.Family].on != nil {
			continue
		}
		if on, why := LocalhostNodePortsFromDump(t); on != nil {
			lnp[t.Family] = localhostNodePorts{on, why}
		}
	}
	return lnp
}

// dumpRow counts a table of the dump the way kube-proxy does. In the IPv4
// filter table that depends on localhostNodePorts (KUBE-FIREWALL's
// localhost drop): from the configuration if given, else as the nat
// table says, else the default.
func dumpRow(t *inspect.IPTable, stale ChainSet, configured *bool, fromNAT localhostNodePorts) TableCount {
	row := TableCount{Family: t.Family, Table: t.Name, Backend: t.Backend, Source: t.Source, InDump: true}
	on := true
	if t.Name == kubeproxy.TableFilter && t.Family != kubeproxy.IPv6 {
		switch {
		case configured != nil:
			on = *configured
			row.LocalhostNodePortsSource = "configuration"
		case fromNAT.on != nil:
			on = *fromNAT.on
			row.LocalhostNodePortsSource = "dump: " + fromNAT.why
		default:
			row.LocalhostNodePortsSource = "default (true): the nat table does not say"
		}
		v := on
		row.LocalhostNodePorts = &v
	}
	row.Actual, row.StaleRules = KubeProxyRuleCount(t, stale, on)
	row.Present = t.RuleCount()
	row.BuiltinJumps = builtinJumps(t)
	row.Others = row.Present - row.Actual - row.StaleRules - row.BuiltinJumps
	if len(stale) > 0 {
		for _, c := range t.Chains {
			if c != nil && !c.Deleted && countedChain(t.Name, t.Family, c.Name, on) && stale.Has(t.Family, t.Name, c.Name) {
				row.StaleChains++
			}
		}
	}
	row.Suspects = suspectRules(t)
	if t.Name == kubeproxy.TableNAT {
		row.UnreferencedChains, row.UnreferencedRules = unreferencedServiceChains(t, stale)
	}
	return row
}

// addMetric puts a rule-count metric on the rows of its table (every
// family's, for a metric without ip_family), or adds a row for a table
// the dump lacks.
func (tr *tableRows) addMetric(rc metrics.RuleCount) {
	if rc.Table != kubeproxy.TableNAT && rc.Table != kubeproxy.TableFilter {
		return
	}
	total, last := rc.Total, rc.Last
	var idx []int
	if rc.Family == "" {
		for k, is := range tr.rowsFor {
			if k.table == rc.Table {
				idx = append(idx, is...)
			}
		}
		sort.Ints(idx)
	} else {
		idx = tr.rowsFor[tableKey{rc.Family, rc.Table}]
	}
	if len(idx) == 0 {
		row := TableCount{Family: rc.Family, Table: rc.Table, Metric: &total, MetricUnlabeled: rc.Family == ""}
		if rc.HasLast {
			row.MetricLast = &last
		}
		row.Reason = fmt.Sprintf("table not in dump: the metrics count %g rules in %s %s, but the dump has no such table with kube-proxy chains (dump the %s table with %s)", total, familyOr(rc.Family), rc.Table, rc.Table, saveCommand(rc.Family))
		row.NotCompared = "the dump has no " + familyOr(rc.Family) + " " + rc.Table + " table"
		tr.rows = append(tr.rows, row)
		return
	}
	for _, i := range idx {
		tr.rows[i].Metric = &total
		if rc.HasLast {
			tr.rows[i].MetricLast = &last
		}
		tr.rows[i].MetricUnlabeled = rc.Family == ""
	}
}

// decideCompared says whether a table of the dump was compared with its
// metric, and why not where it was not.
func decideCompared(row *TableCount, rs *inspect.Ruleset, haveMetrics bool) {
	row.Compared = row.Metric != nil
	if t := rs.IPTable(row.Family, row.Table); row.Compared && t != nil && t.Partial {
		// An excerpt's count says nothing about the table's.
		row.Compared, row.Agree = false, false
		row.NotCompared = "the dump holds only part of this table (an excerpt or one chain's listing)"
		row.Reason = "not compared: " + row.NotCompared + "; pass the whole " + saveCommand(row.Family)
	}
	if !row.Compared && row.NotCompared == "" {
		row.NotCompared = "no rule-count metric for this table"
		if !haveMetrics {
			row.NotCompared = "no metrics given"
		}
	}
}

func familyOr(f kubeproxy.Family) string {
	if f == "" {
		return "(no ip_family)"
	}
	return string(f)
}

func saveCommand(f kubeproxy.Family) string {
	if f == kubeproxy.IPv6 {
		return "ip6tables-save"
	}
	if f == "" {
		return "iptables-save / ip6tables-save"
	}
	return "iptables-save"
}

// explainRow fills Difference, Agree and Reason.
func explainRow(row *TableCount, rows []TableCount, failures []FailureCount, m *metrics.Metrics, mode kubeproxy.Mode, rs *inspect.Ruleset, linger string) {
	staleTxt := ""
	if row.StaleRules > 0 {
		staleTxt = fmt.Sprintf("%d rules of %d stale chains are left out: kube-proxy no longer counts them but has not deleted them yet (%s)", row.StaleRules, row.StaleChains, linger)
	}
	if row.Metric == nil {
		switch {
		case m == nil:
			row.Reason = "no metrics given"
		case mode == kubeproxy.ModeNFTables || mode == kubeproxy.ModeIPVS:
			row.Reason = fmt.Sprintf("kube-proxy runs in %s mode, which counts no iptables rules: these iptables rules are leftovers of iptables mode (kube-proxy removes them at startup; if they are here, something re-created them or kube-proxy could not clean up)", mode)
		default:
			row.Reason = fmt.Sprintf("the metrics have no iptables_total for %s %s", familyOr(row.Family), row.Table)
		}
		return
	}
	metric := int(math.Round(*row.Metric))
	diff := row.Actual - metric
	row.Difference = &diff
	row.Agree = diff == 0
	var why []string
	if row.MetricUnlabeled {
		txt := "version semantics: the metric has no ip_family label (kube-proxy < 1.33), and in dual-stack the IPv4 and IPv6 proxiers overwrite one value"
		dual := false
		for _, o := range rows {
			if o.InDump && o.Table == row.Table && o.Family != row.Family && o.Family != "" {
				dual = true
				if o.Actual == metric && !row.Agree {
					txt += fmt.Sprintf("; it matches the %s count (%d), so %s synced last", o.Family, o.Actual, o.Family)
				}
			}
		}
		if row.Agree && dual {
			txt += fmt.Sprintf("; it matches this table's count, so %s synced last", familyOr(row.Family))
		}
		why = append(why, txt)
	}
	restore := failuresFor(failures, row.Family, metrics.RestoreFailures)
	if row.Agree {
		if staleTxt != "" {
			why = append(why, "agrees once "+staleTxt)
		}
		if restore > 0 {
			why = append(why, fmt.Sprintf("the counts agree, but %g restore(s) failed (%s): kube-proxy sets the metric before iptables-restore runs, so it counts the rules of the failed sync, and the kernel still holds those of the last successful one; equal counts do not mean equal rules", restore, metrics.RestoreFailures))
		}
		row.Reason = strings.Join(why, "; ")
		return
	}
	partial := failuresFor(failures, row.Family, metrics.PartialRestoreFailures)
	if restore > 0 {
		why = append(why, fmt.Sprintf("metric set before a failed restore: kube-proxy sets iptables_total before iptables-restore runs and %g restore(s) failed (%s), so the metric counts rules that may never have reached the kernel", restore, metrics.RestoreFailures))
	} else if partial > 0 {
		why = append(why, fmt.Sprintf("%g partial restore(s) failed (%s): kube-proxy fell back to full syncs", partial, metrics.PartialRestoreFailures))
	}
	staleExplain := row.StaleRules > 0 && row.Actual+row.StaleRules == metric
	if staleExplain {
		// The whole difference: kube-proxy's last sync still counted the
		// chains the objects no longer own. No other cause to offer.
		row.Reason = strings.Join(append(why, fmt.Sprintf("it matches only if the %d rules of the %d chains called stale are counted: kube-proxy still considered them current at its last sync, so the API objects are newer than the metrics (the Services or endpoints changed since, and no sync of kube-proxy has reached the rules since)", row.StaleRules, row.StaleChains)), "; ")
		return
	}
	if diff > 0 && row.UnreferencedRules == diff {
		why = append(why, fmt.Sprintf("stale chains lingering: %d per-service chains with %d rules are no longer reached from KUBE-SERVICES or KUBE-NODEPORTS; kube-proxy stopped counting them and has not deleted them yet (in large-cluster mode it deletes stale chains at most once per syncPeriod); give the API objects to confirm they are stale", row.UnreferencedChains, row.UnreferencedRules))
	} else if diff > 0 {
		if len(row.Suspects) > 0 {
			why = append(why, fmt.Sprintf("another writer: the dump has %d more rule(s) in kube-proxy's chains than kube-proxy counted, and %d rule(s) there are not kube-proxy's (first: %s: %s)", diff, len(row.Suspects), row.Suspects[0].Chain, row.Suspects[0].Rule))
		} else {
			var hint string
			if row.StaleChains == 0 {
				hint = "; stale chains lingering from large-cluster mode also count here unless they are called stale (give the API objects)"
			}
			why = append(why, fmt.Sprintf("another writer, or a later sync: the dump has %d more rule(s) in kube-proxy's chains than kube-proxy counted: another writer added rules to its chains, or the dump was taken after a later kube-proxy sync than the metrics%s", diff, hint))
		}
	} else {
		truncated := false
		for _, d := range rs.Dumps {
			if d.Source != row.Source {
				continue
			}
			for _, w := range d.Warnings {
				if strings.Contains(w, "truncated") {
					truncated = true
				}
			}
		}
		if truncated {
			why = append(why, fmt.Sprintf("the dump looks truncated: it has %d fewer rule(s) than kube-proxy counted", -diff))
		} else if restore == 0 {
			why = append(why, fmt.Sprintf("the dump has %d fewer rule(s) in kube-proxy's chains than kube-proxy counted: something removed rules from its chains (a flush, another writer), or the metrics were scraped after a later sync than the dump", -diff))
		}
	}
	if staleTxt != "" {
		why = append(why, staleTxt)
	}
	if row.MetricLast != nil && *row.MetricLast != *row.Metric {
		why = append(why, fmt.Sprintf("the last sync was partial: it wrote %g of the %g rules", *row.MetricLast, *row.Metric))
	}
	row.Reason = strings.Join(why, "; ")
}

// staleLinger says how long kube-proxy leaves stale chains in a family's
// tables: until its next sync, or, in large-cluster mode (which the dump
// shows or cannot rule out), up to a syncPeriod.
func staleLinger(large LargeClusterEvidence, fam kubeproxy.Family, syncPeriod time.Duration) string {
	for _, f := range large.ByFamily {
		if f.Family == fam && f.FromDump != nil && !*f.FromDump {
			return "kube-proxy deletes them at its next sync"
		}
	}
	return fmt.Sprintf("in large-cluster mode kube-proxy deletes stale chains at most once per syncPeriod, %s", syncPeriod)
}

// builtinJumps counts the rules of the built-in chains that jump to one of
// kube-proxy's fixed chains.
func builtinJumps(t *inspect.IPTable) int {
	n := 0
	for _, c := range t.Chains {
		if c == nil || !kubeproxy.BuiltinChains[c.Name] {
			continue
		}
		for _, r := range c.Rules {
			if f := kubeproxy.Fixed(r.Target); f != nil && f.Owner == "" {
				n++
			}
		}
	}
	return n
}

// unreferencedServiceChains counts the per-service chains (and their
// rules) that no rule reachable from kube-proxy's entry chains jumps to,
// leaving out chains stale already covers.
func unreferencedServiceChains(t *inspect.IPTable, stale ChainSet) (chains, rules int) {
	var queue []*inspect.IPChain
	reached := newChainMarks(t)
	reach := func(c *inspect.IPChain) {
		if c != nil && reached.mark(c) {
			queue = append(queue, c)
		}
	}
	for _, entry := range []string{kubeproxy.ChainServices, kubeproxy.ChainNodePorts, kubeproxy.ChainPostrouting, kubeproxy.ChainMarkMasq} {
		reach(t.Chain(entry))
	}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		for _, r := range c.Rules {
			if strings.HasPrefix(r.Target, kubeproxy.PrefixKube) {
				reach(t.Chain(r.Target))
			}
		}
	}
	for _, c := range t.Chains {
		if c == nil || c.Deleted || !kubeproxy.IsServiceChainName(c.Name) || reached.has(c) || stale.Has(t.Family, t.Name, c.Name) {
			continue
		}
		chains++
		rules += len(c.Rules)
	}
	return chains, rules
}

// chainMarks marks chains of a table by their position: a nat table of
// 100,000 chains made a map of their names grow and rehash all the way. A
// chain not at its position (a table changed after it was indexed) is
// marked in a map.
type chainMarks struct {
	t     *inspect.IPTable
	at    []bool
	moved map[*inspect.IPChain]bool
}

func newChainMarks(t *inspect.IPTable) *chainMarks {
	t.Reindex() // positions are the table's Chains' from here on
	return &chainMarks{t: t, at: make([]bool, len(t.Chains)), moved: map[*inspect.IPChain]bool{}}
}

// mark marks c; false when it was marked already.
func (m *chainMarks) mark(c *inspect.IPChain) bool {
	if m.has(c) {
		return false
	}
	if p := c.Pos(); p < len(m.at) && m.t.Chains[p] == c {
		m.at[p] = true
	} else {
		m.moved[c] = true
	}
	return true
}

func (m *chainMarks) has(c *inspect.IPChain) bool {
	if p := c.Pos(); p < len(m.at) && m.t.Chains[p] == c {
		return m.at[p]
	}
	return m.moved[c]
}

// suspectRules lists rules in kube-proxy's chains that kube-proxy does not
// write, judged by their target (and, where kube-proxy always comments, by
// the comment): evidence of another writer.
func suspectRules(t *inspect.IPTable) []RuleRef {
	var out []RuleRef
	for _, c := range t.Chains {
		if c == nil || !countedChain(t.Name, t.Family, c.Name, true) {
			continue
		}
		var seen map[string]bool
		if len(c.Rules) > 16 {
			seen = make(map[string]bool, len(c.Rules))
		}
		for i, r := range c.Rules {
			why := ""
			switch {
			case !kubeProxyTarget(t.Name, c.Name, r.Target) && !(t.FromNFT && r.Target == ""):
				// (nft shows some iptables-nft targets as nothing)
				why = "target"
			case !t.FromNFT && isDuplicate(c.Rules, i, seen):
				// (not through nft: without comments, nft shows kube-proxy
				// rules that differ only by comment as duplicates)
				why = "duplicate"
			case !t.FromNFT && r.Comment == "" && alwaysCommented(t.Name, c.Name, r):
				why = "comment"
			}
			if seen != nil {
				seen[r.Text] = true
			}
			if why != "" {
				out = append(out, RuleRef{Table: t.Name, Chain: c.Name, Rule: r.Text})
				if len(out) >= maxSuspects {
					return out
				}
			}
		}
	}
	return out
}

// isDuplicate reports whether rules[i] repeats an earlier rule of the
// chain; seen holds the earlier texts of long chains (nil for short ones).
func isDuplicate(rules []*inspect.IPRule, i int, seen map[string]bool) bool {
	if seen != nil {
		return seen[rules[i].Text]
	}
	for _, o := range rules[:i] {
		if o.Text == rules[i].Text {
			return true
		}
	}
	return false
}

// kubeProxyTarget reports whether kube-proxy (any version since 1.24, and
// the older shapes where they linger) writes a rule with target in chain.
func kubeProxyTarget(table, chain, target string) bool {
	if table == kubeproxy.TableNAT {
		switch {
		case chain == kubeproxy.ChainServices || chain == kubeproxy.ChainNodePorts:
			return target == kubeproxy.ChainMarkMasq || target == kubeproxy.ChainNodePorts ||
				kubeproxy.HasAnyPrefix(target, kubeproxy.PrefixService, kubeproxy.PrefixLocal, kubeproxy.PrefixExternal, kubeproxy.PrefixFirewall, kubeproxy.PrefixXLB)
		case chain == kubeproxy.ChainPostrouting:
			return target == "RETURN" || target == "MARK" || target == "MASQUERADE" || target == ""
		case chain == kubeproxy.ChainMarkMasq:
			return target == "MARK"
		case kubeproxy.HasAnyPrefix(chain, kubeproxy.PrefixService, kubeproxy.PrefixLocal):
			return target == kubeproxy.ChainMarkMasq || kubeproxy.HasAnyPrefix(target, kubeproxy.PrefixEndpoint)
		case strings.HasPrefix(chain, kubeproxy.PrefixExternal):
			return target == kubeproxy.ChainMarkMasq || kubeproxy.HasAnyPrefix(target, kubeproxy.PrefixService, kubeproxy.PrefixLocal)
		case strings.HasPrefix(chain, kubeproxy.PrefixFirewall):
			return target == "" || target == kubeproxy.ChainMarkMasq || target == kubeproxy.ChainMarkDrop ||
				kubeproxy.HasAnyPrefix(target, kubeproxy.PrefixExternal, kubeproxy.PrefixService, kubeproxy.PrefixLocal, kubeproxy.PrefixXLB)
		case strings.HasPrefix(chain, kubeproxy.PrefixEndpoint):
			return target == kubeproxy.ChainMarkMasq || target == "DNAT"
		}
		return true
	}
	switch chain {
	case kubeproxy.ChainServices:
		return target == "REJECT"
	case kubeproxy.ChainExternalServices:
		return target == "REJECT" || target == "DROP"
	case kubeproxy.ChainForward:
		return target == "DROP" || target == "ACCEPT"
	case kubeproxy.ChainNodePorts:
		return target == "ACCEPT"
	case kubeproxy.ChainProxyFirewall, kubeproxy.ChainFirewall:
		return target == "DROP"
	}
	return true
}

// alwaysCommented: kube-proxy comments every rule of these chains, in every
// cluster size.
func alwaysCommented(table, chain string, r *inspect.IPRule) bool {
	if table == kubeproxy.TableNAT {
		return chain == kubeproxy.ChainServices || chain == kubeproxy.ChainNodePorts
	}
	switch chain {
	case kubeproxy.ChainServices, kubeproxy.ChainExternalServices, kubeproxy.ChainNodePorts, kubeproxy.ChainProxyFirewall, kubeproxy.ChainFirewall:
		return true
	case kubeproxy.ChainForward:
		return r.Target == "ACCEPT"
	}
	return false
}

// largeClusterEvidence reads large-cluster mode off the comments.
func largeClusterEvidence(rs *inspect.Ruleset) LargeClusterEvidence {
	var ev LargeClusterEvidence
	seen := map[kubeproxy.Family]bool{}
	var sentences []string
	anyTrue, anyFalse := false, false
	for _, t := range rs.IPTables {
		if t == nil || t.Name != kubeproxy.TableNAT || seen[t.Family] || !hasKubeProxyChains(t) {
			continue
		}
		seen[t.Family] = true
		ev.ByFamily = append(ev.ByFamily, largeClusterFamily(t))
	}
	// By family, whatever order the dumps came in.
	sort.SliceStable(ev.ByFamily, func(i, j int) bool { return ev.ByFamily[i].Family < ev.ByFamily[j].Family })
	for _, f := range ev.ByFamily {
		sentences = append(sentences, fmt.Sprintf("%s: %s", familyOr(f.Family), f.Evidence))
		if f.FromDump != nil {
			if *f.FromDump {
				anyTrue = true
			} else {
				anyFalse = true
			}
		}
	}
	yes, no := true, false
	switch {
	case anyTrue:
		ev.FromDump = &yes
	case anyFalse:
		ev.FromDump = &no
	}
	if len(sentences) == 0 {
		ev.Evidence = "no iptables nat table with kube-proxy chains in the dump (nftables mode has no large-cluster mode)"
	} else {
		ev.Evidence = strings.Join(sentences, "; ")
	}
	return ev
}

func largeClusterFamily(t *inspect.IPTable) LargeClusterFamily {
	f := LargeClusterFamily{Family: t.Family}
	for _, c := range t.Chains {
		if c == nil {
			continue
		}
		switch {
		case c.Name == kubeproxy.ChainServices:
			for _, r := range c.Rules {
				f.ServiceRules++
				if r.Comment != "" {
					f.ServiceRulesCommented++
				}
			}
		case strings.HasPrefix(c.Name, kubeproxy.PrefixEndpoint):
			for _, r := range c.Rules {
				f.EndpointRules++
				if r.Comment != "" {
					f.EndpointRulesCommented++
				}
			}
		case kubeproxy.HasAnyPrefix(c.Name, kubeproxy.PrefixService, kubeproxy.PrefixLocal):
			for _, r := range c.Rules {
				if !strings.HasPrefix(r.Target, kubeproxy.PrefixEndpoint) {
					continue
				}
				f.Jumps++
				if r.Comment != "" {
					f.JumpsCommented++
				}
			}
		}
	}
	yes, no := true, false
	ep, epc := f.EndpointRules+f.Jumps, f.EndpointRulesCommented+f.JumpsCommented
	switch {
	case t.FromNFT:
		f.Evidence = "undecidable: read through nft, which does not show iptables-nft's comments"
	case ep == 0:
		f.Evidence = "undecidable: no KUBE-SEP rules or SVC→SEP jumps"
	case f.ServiceRules > 0 && f.ServiceRulesCommented == 0:
		f.Evidence = fmt.Sprintf("undecidable: the %d KUBE-SERVICES rules have no comments either, which kube-proxy always writes there: comments were stripped", f.ServiceRules)
	case epc == 0:
		f.FromDump = &yes
		f.Evidence = fmt.Sprintf("large-cluster mode: none of the %d KUBE-SEP rules and %d SVC→SEP jumps has a comment, while KUBE-SERVICES rules keep theirs (kube-proxy drops those comments above 1000 endpoints)", f.EndpointRules, f.Jumps)
	case epc == ep:
		f.FromDump = &no
		f.Evidence = fmt.Sprintf("small-cluster mode: all %d KUBE-SEP rules and %d SVC→SEP jumps have comments", f.EndpointRules, f.Jumps)
	default:
		f.Evidence = fmt.Sprintf("mixed: %d of %d KUBE-SEP rules and SVC→SEP jumps lack comments: kube-proxy crossed the 1000-endpoint threshold and partial syncs rewrote only changed services (1.37 skips the hourly full resync in large-cluster mode); the endpoint count from the API objects decides", ep-epc, ep)
	}
	return f
}

// syncStates reads the sync timestamps per family.
func syncStates(m *metrics.Metrics, now time.Time, syncPeriod time.Duration) []SyncState {
	out := []SyncState{}
	if m == nil {
		return out
	}
	byFam := map[kubeproxy.Family]*SyncState{}
	var fams []kubeproxy.Family
	get := func(f kubeproxy.Family) *SyncState {
		if byFam[f] == nil {
			byFam[f] = &SyncState{Family: f}
			fams = append(fams, f)
		}
		return byFam[f]
	}
	for _, s := range m.Samples(metrics.LastSync) {
		t := unixFloat(s.Value)
		get(metrics.FamilyLabel(s.Labels["ip_family"])).LastSync = &t
	}
	for _, s := range m.Samples(metrics.LastQueued) {
		t := unixFloat(s.Value)
		get(metrics.FamilyLabel(s.Labels["ip_family"])).LastQueued = &t
	}
	sort.Slice(fams, func(i, j int) bool { return fams[i] < fams[j] })
	hungAfter := 2 * syncPeriod
	for _, f := range fams {
		st := byFam[f]
		if !now.IsZero() {
			if st.LastSync != nil {
				a := now.Sub(*st.LastSync).Seconds()
				st.LastSyncAgeSeconds = &a
			}
			if st.LastQueued != nil {
				a := now.Sub(*st.LastQueued).Seconds()
				st.LastQueuedAgeSeconds = &a
			}
		}
		var why []string
		switch {
		case st.LastSync == nil && st.LastQueued != nil:
			st.Pending = true
			why = append(why, "a sync was queued but none has succeeded since kube-proxy started")
			if st.LastQueuedAgeSeconds != nil && *st.LastQueuedAgeSeconds > hungAfter.Seconds() {
				st.Hung = true
				why = append(why, fmt.Sprintf("for %s: kube-proxy is hung or every sync fails (its /healthz reports unhealthy after %s)", secs(*st.LastQueuedAgeSeconds), hungAfter))
			}
		case st.LastSync != nil && st.LastQueued != nil && st.LastQueued.After(*st.LastSync):
			st.Pending = true
			gap := st.LastQueued.Sub(*st.LastSync)
			why = append(why, fmt.Sprintf("a sync was queued %s after the last successful one and has not run", gap.Round(time.Millisecond)))
			if st.LastQueuedAgeSeconds != nil {
				if *st.LastQueuedAgeSeconds > hungAfter.Seconds() {
					st.Hung = true
					why = append(why, fmt.Sprintf("queued but not synced for %s: kube-proxy is hung or its syncs fail (its /healthz reports unhealthy after 2 × syncPeriod = %s)", secs(*st.LastQueuedAgeSeconds), hungAfter))
				} else {
					why = append(why, fmt.Sprintf("queued %s ago, within 2 × syncPeriod (%s)", secs(*st.LastQueuedAgeSeconds), hungAfter))
				}
			} else {
				why = append(why, "give the scrape time to tell a pending sync from a hung one")
			}
		}
		if !st.Hung && st.LastSyncAgeSeconds != nil && *st.LastSyncAgeSeconds > (kubeproxy.FullSyncPeriod+hungAfter).Seconds() {
			st.Hung = true
			why = append(why, fmt.Sprintf("no successful sync for %s, though kube-proxy syncs at least hourly: it is stuck or not running (or the metrics are old)", secs(*st.LastSyncAgeSeconds)))
		}
		if st.LastSyncAgeSeconds != nil && *st.LastSyncAgeSeconds < -60 {
			why = append(why, "the last sync is in the future: the node's clock and the scrape time disagree")
		}
		if f == "" {
			why = append(why, "no ip_family label (kube-proxy < 1.33): in dual-stack these are whichever family's proxier wrote last")
		}
		st.Reason = strings.Join(why, "; ")
		out = append(out, *st)
	}
	return out
}

func unixFloat(v float64) time.Time {
	sec, frac := math.Modf(v)
	return time.Unix(int64(sec), int64(frac*1e9)).UTC()
}

func secs(s float64) string {
	return (time.Duration(s * float64(time.Second))).Round(time.Second).String()
}

// syncDurations adds the duration histograms to each family's sync state,
// and turns a "hung" that slow syncs explain into "slow".
func syncDurations(states []SyncState, m, earlier *metrics.Metrics, syncPeriod time.Duration) {
	if m == nil {
		return
	}
	byFamily := func(hs []metrics.Histogram, fam kubeproxy.Family) (metrics.Histogram, bool) {
		for _, h := range hs {
			if metrics.FamilyLabel(h.Labels["ip_family"]) == fam {
				return h, true
			}
		}
		return metrics.Histogram{}, false
	}
	all, full, partial, prog := m.Histograms(metrics.SyncDuration), m.Histograms(metrics.FullSyncDuration), m.Histograms(metrics.PartialSyncDuration), m.Histograms(metrics.NetworkProgramming)
	var before []metrics.Histogram
	if earlier != nil {
		before = earlier.Histograms(metrics.SyncDuration)
	}
	for i := range states {
		st := &states[i]
		if h, ok := byFamily(all, st.Family); ok {
			st.Syncs, st.MeanSyncSeconds, st.LongSyncs = h.Count, h.Mean(), h.AboveTop
			if b, ok := byFamily(before, st.Family); ok && h.Count >= b.Count {
				n := h.Count - b.Count
				st.RecentSyncs = &n
				if n > 0 {
					mean := (h.Sum - b.Sum) / float64(n)
					st.RecentMeanSyncSeconds = &mean
				}
			}
		}
		if h, ok := byFamily(full, st.Family); ok {
			st.FullSyncs, st.MeanFullSyncSeconds = h.Count, h.Mean()
		}
		if h, ok := byFamily(partial, st.Family); ok {
			st.PartialSyncs, st.MeanPartialSyncSeconds = h.Count, h.Mean()
		}
		if h, ok := byFamily(prog, st.Family); ok {
			st.Programmed, st.MeanProgrammingSeconds, st.LongProgramming = h.Count, h.Mean(), h.AboveTop
		}
		// Queued longer than 2 × syncPeriod, while syncs take about as long:
		// one is most likely still running.
		mean := st.MeanSyncSeconds
		if st.RecentMeanSyncSeconds != nil {
			mean = *st.RecentMeanSyncSeconds
		}
		if st.Hung && st.Pending && st.LastSync != nil && st.LastQueuedAgeSeconds != nil && mean > 0 &&
			*st.LastQueuedAgeSeconds < 2*mean+(2*syncPeriod).Seconds() {
			st.Hung, st.Slow = false, true
			st.Reason = fmt.Sprintf("a sync was queued %s ago and has not finished, but kube-proxy's syncs take %s on average (%d longer than the histograms' 16 s): most likely one is still running, and changes reach the rules that late", secs(*st.LastQueuedAgeSeconds), secs(mean), st.LongSyncs)
		}
	}
}
