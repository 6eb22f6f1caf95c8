package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"time"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/client-go/tools/events"
	"k8s.io/component-base/metrics/legacyregistry"
	"k8s.io/kubernetes/pkg/proxy"
	"k8s.io/kubernetes/pkg/proxy/metaproxier"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/kubernetes/pkg/proxy/util/nfacct"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
	"sigs.k8s.io/knftables"
)

type proxier = proxy.Provider

var families = []v1.IPFamily{v1.IPv4Protocol, v1.IPv6Protocol}

func famSuffix(f v1.IPFamily) string {
	if f == v1.IPv4Protocol {
		return "ipv4"
	}
	return "ipv6"
}

func writeFile(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// ---------------------------------------------------------------------------
// objects.json / meta.json

// kubectlList renders objects the way `kubectl get services,endpointslices -A -o json`
// does: a v1 List, items with kind/apiVersion, keys sorted, 4-space indent.
func kubectlList(o *ObjectSet) ([]byte, error) {
	var objs []any
	for _, s := range o.Services {
		objs = append(objs, s)
	}
	for _, s := range o.Slices {
		objs = append(objs, s)
	}
	return listOf(objs)
}

// listOf renders objects as `kubectl get … -o json` prints them.
func listOf(objs []any) ([]byte, error) {
	var items []any
	add := func(obj any) error {
		b, err := json.Marshal(obj)
		if err != nil {
			return err
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			return err
		}
		items = append(items, m)
		return nil
	}
	for _, obj := range objs {
		if err := add(obj); err != nil {
			return nil, err
		}
	}
	list := map[string]any{
		"apiVersion": "v1",
		"kind":       "List",
		"items":      items,
		"metadata":   map[string]any{"resourceVersion": ""},
	}
	b, err := json.MarshalIndent(list, "", "    ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

type meta struct {
	KubeProxyVersion         string          `json:"kubeProxyVersion"`
	Node                     string          `json:"node"`
	MasqueradeBit            int             `json:"masqueradeBit"`
	LargeClusterMode         bool            `json:"largeClusterMode"`
	LargeClusterModeByFamily map[string]bool `json:"largeClusterModeByFamily"`
	Modes                    []string        `json:"modes"`
	Description              string          `json:"description"`
	NodeIPs                  []string        `json:"nodeIPs"`
	PodCIDRs                 []string        `json:"podCIDRs"`
	ClusterCIDRs             []string        `json:"clusterCIDRs"`
	ServiceCIDRs             []string        `json:"serviceCIDRs"`
	SyncPeriod               string          `json:"syncPeriod"`
	Syncs                    int             `json:"syncs"`

	// Optional, only in the scenarios they describe (see testdata/fixtures/README.md).
	StaleChains                []ChainRef        `json:"staleChains,omitempty"`
	ForeignMarkRules           []ForeignMarkRule `json:"foreignMarkRules,omitempty"`
	LegacyBackendHasKubeChains bool              `json:"legacyBackendHasKubeChains,omitempty"`
	LegacyBackend              *LegacyBackend    `json:"legacyBackend,omitempty"`
	LeftoverChains             []LeftoverChain   `json:"leftoverChains,omitempty"`
	SyncFailures               []SyncFailure     `json:"syncFailures,omitempty"`
	// NodeLabels are the labels kube-proxy was told the node has
	// (OnTopologyChange), when the scenario uses topology.
	NodeLabels map[string]string `json:"nodeLabels,omitempty"`
}

// ChainRef names one chain the way expected.json does.
type ChainRef struct {
	Mode   string `json:"mode"`
	Family string `json:"family"`
	Table  string `json:"table"`
	Chain  string `json:"chain"`
}

// LegacyBackend says what the iptables legacy backend holds next to the
// current (nft backend) state.
type LegacyBackend struct {
	KubeProxyVersion string `json:"kubeProxyVersion"`
	Scenario         string `json:"scenario"`
}

// SyncFailure is one failed kube-proxy sync.
type SyncFailure struct {
	Sync     int    `json:"sync"`
	Mode     string `json:"mode"`
	Family   string `json:"family"`
	FullSync bool   `json:"fullSync"`
	// FakeIPTablesError is the error of the fake iptables' RestoreAll that
	// failed the sync; the real tools' answer to the same input is in
	// iptables/failed-restore-{nft,legacy}-ipv4.stderr.txt.
	FakeIPTablesError string `json:"fakeIPTablesError"`
}

// endpointCount mirrors kube-proxy's large-cluster computation per family:
// the sum over service ports of all endpoints (terminating and non-local
// included) of that family.
func endpointCount(o *ObjectSet, fam discovery.AddressType) int {
	svcs := map[string]*v1.Service{}
	for _, s := range o.Services {
		svcs[s.Namespace+"/"+s.Name] = s
	}
	n := 0
	for _, sl := range o.Slices {
		if sl.AddressType != fam {
			continue
		}
		svc := svcs[sl.Namespace+"/"+sl.Labels[discovery.LabelServiceName]]
		if svc == nil || svc.Spec.ClusterIP == v1.ClusterIPNone || svc.Spec.Type == v1.ServiceTypeExternalName {
			continue
		}
		for _, p := range sl.Ports {
			found := false
			for _, sp := range svc.Spec.Ports {
				if p.Name != nil && sp.Name == *p.Name && p.Protocol != nil && sp.Protocol == *p.Protocol {
					found = true
				}
			}
			if found {
				n += len(sl.Endpoints)
			}
		}
	}
	return n
}

func finalObjects(sc *Scenario) (first, final *ObjectSet) {
	first = sc.Objects()
	final = first
	if sc.Churn != nil {
		final = sc.Churn(first)
		final.sort()
	}
	return first, final
}

func writeObjects(sc *Scenario, out string) error {
	_, final := finalObjects(sc)
	b, err := kubectlList(final)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(out, "objects.json"), b); err != nil {
		return err
	}
	if sc.NodeLabels != nil {
		// kubectl get nodes -o json: what tells a node's zone offline
		b, err := listOf(nodeObjects(sc))
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(out, "nodes.json"), b); err != nil {
			return err
		}
	}
	large := map[string]bool{}
	any := false
	// large-cluster mode is decided at each sync; the first sync decides which
	// rules lose their comments, the last one what the metrics say. Both
	// agree in these scenarios.
	for _, f := range []discovery.AddressType{discovery.AddressTypeIPv4, discovery.AddressTypeIPv6} {
		l := endpointCount(final, f) > 1000
		large[string(f)] = l
		any = any || l
	}
	syncs := 1
	if sc.Churn != nil {
		syncs = 2
	}
	syncs += sc.ExtraSyncs
	m := meta{
		KubeProxyVersion:         kubeProxyVersion,
		Node:                     nodeName,
		MasqueradeBit:            sc.MasqueradeBit,
		LargeClusterMode:         any,
		LargeClusterModeByFamily: large,
		Modes:                    sc.Modes,
		Description:              sc.Description,
		NodeIPs:                  []string{nodeIPv4, nodeIPv6},
		PodCIDRs:                 []string{podCIDRv4, podCIDRv6},
		ClusterCIDRs:             []string{clusterCIDRv4, clusterCIDRv6},
		ServiceCIDRs:             []string{svcCIDRv4, svcCIDRv6},
		SyncPeriod:               "30s",
		Syncs:                    syncs,
		ForeignMarkRules:         sc.ForeignMarkRules,
		LeftoverChains:           sc.LeftoverChains,
		NodeLabels:               sc.NodeLabels,
	}
	if sc.LegacyBackend != "" {
		m.LegacyBackendHasKubeChains = true
		m.LegacyBackend = &LegacyBackend{KubeProxyVersion: "v1.34.3", Scenario: sc.LegacyBackend}
	}
	return writeMeta(out, &m)
}

func writeMeta(out string, m *meta) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return err
	}
	return writeFile(filepath.Join(out, "meta.json"), buf.Bytes())
}

// updateMeta lets a later step add what it learnt to meta.json.
func updateMeta(out string, f func(*meta)) error {
	b, err := os.ReadFile(filepath.Join(out, "meta.json"))
	if err != nil {
		return err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	f(&m)
	return writeMeta(out, &m)
}

// ---------------------------------------------------------------------------
// Feeding a proxier

func newRecorder() events.EventRecorder {
	r := events.NewFakeRecorder(100)
	go func() {
		for range r.Events {
		}
	}()
	return r
}

// feed replays the informer start-up sequence: all Services and
// EndpointSlices, then the "synced" notifications (which make kube-proxy run
// its first, full, sync).
// tellTopology gives the proxiers the node's labels before the first sync,
// as kube-proxy's node informer does (OnTopologyChange).
func tellTopology(p proxier, sc *Scenario) {
	if sc.NodeLabels != nil {
		p.OnTopologyChange(sc.NodeLabels)
	}
}

func feed(p proxier, o *ObjectSet) {
	p.OnServiceCIDRsChanged([]string{svcCIDRv4, svcCIDRv6})
	for _, s := range o.Services {
		p.OnServiceAdd(s)
	}
	for _, s := range o.Slices {
		p.OnEndpointSliceAdd(s)
	}
	p.OnServiceSynced()
	p.OnEndpointSlicesSynced()
}

// applyChurn feeds the differences between two object sets as informer events.
func applyChurn(p proxier, before, after *ObjectSet) {
	key := func(ns, name string) string { return ns + "/" + name }
	oldSvc := map[string]*v1.Service{}
	for _, s := range before.Services {
		oldSvc[key(s.Namespace, s.Name)] = s
	}
	newSvc := map[string]*v1.Service{}
	for _, s := range after.Services {
		newSvc[key(s.Namespace, s.Name)] = s
	}
	oldSl := map[string]*discovery.EndpointSlice{}
	for _, s := range before.Slices {
		oldSl[key(s.Namespace, s.Name)] = s
	}
	newSl := map[string]*discovery.EndpointSlice{}
	for _, s := range after.Slices {
		newSl[key(s.Namespace, s.Name)] = s
	}
	for _, s := range after.Slices {
		if o, ok := oldSl[key(s.Namespace, s.Name)]; ok {
			if o.ResourceVersion != s.ResourceVersion {
				p.OnEndpointSliceUpdate(o, s)
			}
		} else {
			p.OnEndpointSliceAdd(s)
		}
	}
	for _, s := range before.Slices {
		if _, ok := newSl[key(s.Namespace, s.Name)]; !ok {
			p.OnEndpointSliceDelete(s)
		}
	}
	for _, s := range after.Services {
		if o, ok := oldSvc[key(s.Namespace, s.Name)]; ok {
			if o.ResourceVersion != s.ResourceVersion {
				p.OnServiceUpdate(o, s)
			}
		} else {
			p.OnServiceAdd(s)
		}
	}
	for _, s := range before.Services {
		if _, ok := newSvc[key(s.Namespace, s.Name)]; !ok {
			p.OnServiceDelete(s)
		}
	}
}

// syncNow runs the proxiers' syncProxyRules synchronously. The exported
// OnEndpointSlicesSynced does exactly "mark synced; syncProxyRules()" and is
// safe to call again; it does not force a full sync, so this is the same
// partial sync that the BoundedFrequencyRunner would run after the churn.
func syncNow(p proxier) { p.OnEndpointSlicesSynced() }

// markLoopStarted mimics SyncLoop's start (which kube-proxy runs right after
// creating the proxier): it sets the last-queued timestamp metric.
func markLoopStarted() {
	for _, f := range families {
		metrics.SyncProxyRulesLastQueuedTimestamp.WithLabelValues(string(f)).SetToCurrentTime()
	}
}

// ---------------------------------------------------------------------------
// Metrics

func setupMetrics(mode string) {
	// as kube-proxy's main does
	utilfeature.DefaultMutableFeatureGate.AddMetrics()
	registerMetrics(mode)
}

// droppedMetricPrefixes: families left out of metrics-*.txt: the Go runtime
// and process collectors, which are not kube-proxy's and differ on every run.
var droppedMetricPrefixes = []string{"go_", "process_"}

// scrapeMetrics serves /metrics exactly as kube-proxy does
// (legacyregistry.Handler()) and returns the text exposition, minus the
// droppedMetricPrefixes families.
func scrapeMetrics() ([]byte, error) {
	req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
	req.Header.Set("Accept", "text/plain")
	rec := httptest.NewRecorder()
	legacyregistry.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		return nil, fmt.Errorf("metrics handler returned %d", rec.Code)
	}
	var out bytes.Buffer
	skip := false
	for _, line := range strings.SplitAfter(rec.Body.String(), "\n") {
		if line == "" {
			continue
		}
		name := ""
		if strings.HasPrefix(line, "# HELP ") || strings.HasPrefix(line, "# TYPE ") {
			name = strings.Fields(line)[2]
		} else if !strings.HasPrefix(line, "#") {
			name = line
		}
		if name != "" {
			skip = false
			for _, p := range droppedMetricPrefixes {
				skip = skip || strings.HasPrefix(name, p)
			}
		}
		if !skip {
			out.WriteString(line)
		}
	}
	return out.Bytes(), nil
}

// ---------------------------------------------------------------------------
// iptables mode

// nodeIPTables is the fake iptables of k8s.io/kubernetes/pkg/util/iptables/testing
// with two fixes so that its dump looks like a real node:
//   - EnsureRule/DeleteRule quote arguments containing spaces (the real runner
//     passes them as separate argv entries; the fake joins them with spaces,
//     which would make `-m comment --comment kubernetes service portals`
//     unparseable for iptables-restore);
//   - Monitor does what the real runner's Monitor does first: create the
//     KUBE-PROXY-CANARY chain in each table (the fake's Monitor is a no-op).
type nodeIPTables struct {
	*iptablestest.FakeIPTables
	monitorDone chan struct{}
	// ensured counts EnsureRule calls: kube-proxy ensures its jump rules on
	// full syncs only, so a sync with ensured > 0 is a full one.
	ensured  int
	failures []restoreFailure
}

type restoreFailure struct {
	fullSync bool
	data     []byte
	err      error
}

func (n *nodeIPTables) RestoreAll(data []byte, flush utiliptables.FlushFlag, counters utiliptables.RestoreCountersFlag) error {
	err := n.FakeIPTables.RestoreAll(data, flush, counters)
	if err != nil {
		n.failures = append(n.failures, restoreFailure{fullSync: n.ensured > 0, data: append([]byte(nil), data...), err: err})
	}
	return err
}

func quoteArgs(args []string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		if strings.ContainsAny(a, " \t") {
			a = `"` + a + `"`
		}
		out[i] = a
	}
	return out
}

func (n *nodeIPTables) EnsureRule(position utiliptables.RulePosition, table utiliptables.Table, chain utiliptables.Chain, args ...string) (bool, error) {
	n.ensured++
	return n.FakeIPTables.EnsureRule(position, table, chain, quoteArgs(args)...)
}

func (n *nodeIPTables) DeleteRule(table utiliptables.Table, chain utiliptables.Chain, args ...string) error {
	return n.FakeIPTables.DeleteRule(table, chain, quoteArgs(args)...)
}

func (n *nodeIPTables) Monitor(canary utiliptables.Chain, tables []utiliptables.Table, reloadFunc func(), interval time.Duration, stopCh <-chan struct{}) {
	for _, t := range tables {
		_, _ = n.FakeIPTables.EnsureChain(t, canary)
	}
	close(n.monitorDone)
}

func runIPTables(ctx context.Context, sc *Scenario, out string) error {
	setupMetrics("iptables")
	first, final := finalObjects(sc)
	fakes := map[v1.IPFamily]*iptablestest.FakeIPTables{}
	ipts := map[v1.IPFamily]*nodeIPTables{}
	ps := map[v1.IPFamily]proxier{}
	rec := newRecorder()
	for _, f := range families {
		fakes[f] = newFakeIPTables(f)
		if sc.IPTablesSeed != nil {
			if seed := sc.IPTablesSeed(f); seed != "" {
				// what other components left on the node before kube-proxy started
				if err := fakes[f].RestoreAll([]byte(seed), utiliptables.NoFlushTables, utiliptables.NoRestoreCounters); err != nil {
					return fmt.Errorf("seeding the fake iptables (%s): %w", f, err)
				}
				if err := writeFile(filepath.Join(out, "iptables", "foreign-"+famSuffix(f)+".txt"), []byte(seed)); err != nil {
					return err
				}
			}
		}
		ipt := &nodeIPTables{FakeIPTables: fakes[f], monitorDone: make(chan struct{})}
		ipts[f] = ipt
		p, err := newIPTablesProxier(ctx, sc, f, ipt, rec)
		if err != nil {
			return fmt.Errorf("NewProxier(%s): %w", f, err)
		}
		// NewProxier starts `go ipt.Monitor(...)`; wait for the canaries
		// so that the fake is not used concurrently.
		select {
		case <-ipt.monitorDone:
		case <-time.After(10 * time.Second):
			return fmt.Errorf("iptables Monitor was not started")
		}
		ps[f] = p
	}
	mp := metaproxier.NewMetaProxier(ps[v1.IPv4Protocol], ps[v1.IPv6Protocol])
	markLoopStarted()
	tellTopology(mp, sc)
	var failures []SyncFailure
	sync := 0
	// run one sync (fn) and note which families failed it
	step := func(fn func()) {
		sync++
		for _, f := range families {
			ipts[f].ensured = 0
			ipts[f].failures = ipts[f].failures[:0:0]
		}
		fn()
		for _, f := range families {
			for _, fl := range ipts[f].failures {
				failures = append(failures, SyncFailure{Sync: sync, Mode: "iptables", Family: string(f), FullSync: fl.fullSync, FakeIPTablesError: fl.err.Error()})
				// kube-proxy's input of the last failed restore of this family
				if err := writeFile(filepath.Join(out, "iptables", "failed-restore-"+famSuffix(f)+".txt"), fl.data); err != nil {
					panic(err)
				}
			}
		}
	}
	step(func() { feed(mp, first) })
	if sc.Churn != nil {
		for _, f := range families {
			if err := writeFile(filepath.Join(out, "iptables", "restore-"+famSuffix(f)+".sync1.txt"), []byte(fakes[f].Dump.String())); err != nil {
				return err
			}
		}
		step(func() {
			applyChurn(mp, first, final)
			syncNow(mp)
		})
	}
	for i := 0; i < sc.ExtraSyncs; i++ {
		step(func() { syncNow(mp) })
	}
	if (len(failures) > 0) != sc.VerifyFailures {
		return fmt.Errorf("%d failed restores, scenario expects failures: %v", len(failures), sc.VerifyFailures)
	}
	if len(failures) > 0 {
		if err := updateMeta(out, func(m *meta) { m.SyncFailures = failures }); err != nil {
			return err
		}
	}
	for _, f := range families {
		if err := writeFile(filepath.Join(out, "iptables", "restore-"+famSuffix(f)+".txt"), []byte(fakes[f].Dump.String())); err != nil {
			return err
		}
	}
	m, err := scrapeMetrics()
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(out, "metrics-iptables.txt"), m)
}

// ---------------------------------------------------------------------------
// nftables mode

// teeNFT forwards everything to kube-proxy's real knftables interface and
// replays each successful transaction into a knftables.Fake, whose Dump() is
// the "knftables dump" fixture.
type teeNFT struct {
	knftables.Interface
	fake  *knftables.Fake
	txlog *bytes.Buffer
	err   error
}

func (t *teeNFT) Run(ctx context.Context, tx *knftables.Transaction) error {
	err := t.Interface.Run(ctx, tx)
	fmt.Fprintf(t.txlog, "# ---- transaction (result: %v)\n%s", err, tx.String())
	if err == nil {
		if ferr := t.fake.Run(ctx, tx); ferr != nil && t.err == nil {
			t.err = fmt.Errorf("replaying transaction into knftables.Fake: %w", ferr)
		}
	}
	return err
}

// swapNFTables replaces the unexported `nftables knftables.Interface` field of
// an *nftables.Proxier (kube-proxy creates it from the real nft inside
// NewProxier and offers no injection point).
func swapNFTables(p any, wrap func(knftables.Interface) knftables.Interface) error {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("unexpected proxier type %T", p)
	}
	f := v.Elem().FieldByName("nftables")
	if !f.IsValid() {
		return fmt.Errorf("%T has no field nftables", p)
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	cur, ok := f.Interface().(knftables.Interface)
	if !ok {
		return fmt.Errorf("field nftables of %T is %s", p, f.Type())
	}
	f.Set(reflect.ValueOf(wrap(cur)))
	return nil
}

func runNFTables(ctx context.Context, sc *Scenario, out string) error {
	setupMetrics("nftables")
	first, final := finalObjects(sc)
	run, err := newNFTRun(ctx, sc)
	if err != nil {
		return err
	}
	mp := metaproxier.NewMetaProxier(run.ps[v1.IPv4Protocol], run.ps[v1.IPv6Protocol])
	markLoopStarted()
	tellTopology(mp, sc)
	feed(mp, first)
	if sc.Churn != nil {
		applyChurn(mp, first, final)
		syncNow(mp)
	}
	for i := 0; i < sc.ExtraSyncs; i++ {
		syncNow(mp)
	}
	if err := run.recordStaleChains(sc, out); err != nil {
		return err
	}
	if err := loadForeignNFT(sc, out); err != nil {
		return err
	}
	if err := run.writeDumps(sc, out); err != nil {
		return err
	}
	if err := writeNFTRuleset(out); err != nil {
		return err
	}
	m, err := scrapeMetrics()
	if err != nil {
		return err
	}
	return writeFile(filepath.Join(out, "metrics-nftables.txt"), m)
}

// nftRun is an nftables-mode run: one proxier per family, each with its
// knftables interface teed into a fake that gives the knftables dump.
type nftRun struct {
	ps   map[v1.IPFamily]proxier
	raws map[v1.IPFamily]any // the *nftables.Proxier behind ps
	tees map[v1.IPFamily]*teeNFT
}

// newNFTRun makes the proxiers of both families and tees their nft.
func newNFTRun(ctx context.Context, sc *Scenario) (*nftRun, error) {
	run := &nftRun{ps: map[v1.IPFamily]proxier{}, raws: map[v1.IPFamily]any{}, tees: map[v1.IPFamily]*teeNFT{}}
	rec := newRecorder()
	for _, f := range families {
		p, raw, err := newNFTablesProxier(ctx, sc, f, rec)
		if err != nil {
			return nil, fmt.Errorf("NewProxier(%s): %w", f, err)
		}
		fam := knftables.IPv4Family
		if f == v1.IPv6Protocol {
			fam = knftables.IPv6Family
		}
		t := &teeNFT{fake: knftables.NewFake(fam, "kube-proxy"), txlog: &bytes.Buffer{}}
		if err := swapNFTables(raw, func(real knftables.Interface) knftables.Interface {
			t.Interface = real
			return t
		}); err != nil {
			return nil, err
		}
		run.ps[f] = p
		run.raws[f] = raw
		run.tees[f] = t
	}
	return run, nil
}

// recordStaleChains writes to meta.json the chains kube-proxy has flushed
// and will delete in a later sync; there are some exactly when the
// scenario has churn.
func (run *nftRun) recordStaleChains(sc *Scenario, out string) error {
	var stale []ChainRef
	for _, f := range families {
		names, err := staleChainsOf(run.raws[f])
		if err != nil {
			return err
		}
		for _, n := range names {
			ch := run.tees[f].fake.Table.Chains[n]
			if ch == nil || len(ch.Rules) != 0 {
				return fmt.Errorf("%s: stale chain %s is not an empty chain in the ruleset", f, n)
			}
			stale = append(stale, ChainRef{Mode: "nftables", Family: string(f), Table: "kube-proxy", Chain: n})
		}
	}
	if (len(stale) > 0) != (sc.Churn != nil) {
		return fmt.Errorf("%d stale nftables chains after the syncs (churn: %v)", len(stale), sc.Churn != nil)
	}
	if len(stale) > 0 {
		return updateMeta(out, func(m *meta) { m.StaleChains = stale })
	}
	return nil
}

// loadForeignNFT loads the scenario's foreign ruleset next to
// kube-proxy's, and keeps a copy.
func loadForeignNFT(sc *Scenario, out string) error {
	if sc.NFTForeign == "" {
		return nil
	}
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(sc.NFTForeign)
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft -f (foreign ruleset): %w: %s", err, b)
	}
	return writeFile(filepath.Join(out, "nftables", "foreign.nft"), []byte(sc.NFTForeign))
}

// writeDumps writes each family's knftables dump (and, with
// FIXTUREGEN_WORK, its transaction log).
func (run *nftRun) writeDumps(sc *Scenario, out string) error {
	for _, f := range families {
		t := run.tees[f]
		if t.err != nil {
			return fmt.Errorf("%s: %w", f, t.err)
		}
		if err := writeFile(filepath.Join(out, "nftables", "knftables-"+famSuffix(f)+".txt"), []byte(t.fake.Dump())); err != nil {
			return err
		}
		if dir := os.Getenv("FIXTUREGEN_WORK"); dir != "" {
			_ = writeFile(filepath.Join(dir, sc.Name, "nft-transactions-"+famSuffix(f)+".txt"), t.txlog.Bytes())
		}
	}
	return nil
}

// writeNFTRuleset writes the kernel's ruleset as nft lists it, JSON
// (normalised) and text.
func writeNFTRuleset(out string) error {
	for _, c := range []struct {
		file string
		args []string
	}{
		{"ruleset.json", []string{"-j", "list", "ruleset"}},
		{"ruleset.txt", []string{"list", "ruleset"}},
	} {
		b, err := exec.Command("nft", c.args...).Output()
		if err != nil {
			return fmt.Errorf("nft %s: %w", strings.Join(c.args, " "), err)
		}
		if strings.HasSuffix(c.file, ".json") {
			b, err = normalizeNFTJSON(b)
			if err != nil {
				return err
			}
		}
		if err := writeFile(filepath.Join(out, "nftables", c.file), b); err != nil {
			return err
		}
	}
	return nil
}

// staleChainsOf reads the unexported staleChains map of an *nftables.Proxier:
// the chains kube-proxy flushed because nothing uses them any more, to be
// deleted by a sync more than one second later. Sorted.
func staleChainsOf(p any) ([]string, error) {
	v := reflect.ValueOf(p)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("unexpected proxier type %T", p)
	}
	f := v.Elem().FieldByName("staleChains")
	if !f.IsValid() || f.Kind() != reflect.Map {
		return nil, fmt.Errorf("%T has no map field staleChains", p)
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	var names []string
	for _, k := range f.MapKeys() {
		names = append(names, k.String())
	}
	sort.Strings(names)
	return names, nil
}

// normalizeNFTJSON only appends a trailing newline; nft -j prints the whole
// ruleset as one line, which is kept as is (it is what a plugin reads).
func normalizeNFTJSON(b []byte) ([]byte, error) {
	if !json.Valid(b) {
		return nil, fmt.Errorf("nft -j output is not valid JSON")
	}
	b = bytes.TrimRight(b, "\n")
	return append(b, '\n'), nil
}

// ---------------------------------------------------------------------------

func nfacctEnsure() error {
	r, err := nfacct.New()
	if err != nil {
		return err
	}
	names := []string{metrics.IPTablesCTStateInvalidDroppedNFAcctCounter, metrics.LocalhostNodePortAcceptedNFAcctCounter}
	sort.Strings(names)
	for _, n := range names {
		if err := r.Ensure(n); err != nil {
			return fmt.Errorf("nfacct %s: %w", n, err)
		}
	}
	return nil
}
