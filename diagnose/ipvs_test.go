package diagnose_test

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/conntrack"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// The IPVS fixtures: the state kube-proxy v1.37.2's real IPVS proxier left
// (hack/fixturegen -tags kpipvs), each table in three forms.
var (
	ipvsScenarios = []string{"small-v1.37", "topology-v1.37", "nft-churn-v1.37", "masq-bit15-v1.37", "ipvs-drain-v1.37", "ipvs-loopback-v1.37"}
	ipvsTables    = []string{"proc-net-ip_vs.txt", "ipvsadm-Ln.txt", "ipvsadm-Sn.txt"}
)

// ipvsNode is a scenario's IPVS node as an SRE would pass it: the table
// (edited by edit), the iptables rules, the objects and Nodes, kube-proxy's
// configuration in IPVS mode, the node's addresses and a healthy kernel.
func ipvsNode(t *testing.T, sc, table string, edit func(string) string, edits map[string]func(string) string) *diagnose.Node {
	t.Helper()
	return ipvsNodeWith(t, sc, table, edit, edits, ipvsSideFiles)
}

// The files read beside the table: kube-ipvs0's addresses from ip addr,
// or (procSideFiles) from the kernel's local routes as a live read has them.
var (
	ipvsSideFiles = []string{"iptables-save-nft-ipv4.txt", "iptables-save-nft-ipv6.txt", "ipset-save.txt", "ip-addr-kube-ipvs0.txt"}
	procSideFiles = []string{"iptables-save-nft-ipv4.txt", "iptables-save-nft-ipv6.txt", "ipset-save.txt", "proc-net-fib_trie.txt", "proc-net-if_inet6.txt"}
)

func ipvsNodeWith(t *testing.T, sc, table string, edit func(string) string, edits map[string]func(string) string, side []string) *diagnose.Node {
	t.Helper()
	dir := fixture.Dir(sc)
	objs := fixture.Objects(t, dir)
	if text, ok := fixture.Text(t, dir, "nodes.json"); ok {
		nodes, err := correlate.ReadObjects(strings.NewReader(text), "nodes.json")
		if err != nil {
			t.Fatal(err)
		}
		objs.Add(nodes)
	}
	text, ok := fixture.Text(t, filepath.Join(dir, "ipvs"), table)
	if !ok {
		t.Fatalf("%s has no ipvs/%s", sc, table)
	}
	if edit != nil {
		text = edit(text)
	}
	rs := &inspect.Ruleset{}
	rs.Merge(fixture.Parse(t, text, table))
	for _, f := range side {
		if s, ok := fixture.Text(t, filepath.Join(dir, "ipvs"), f); ok {
			if e := edits[f]; e != nil {
				if s2 := e(s); s2 != s {
					s = s2
				} else {
					t.Fatalf("the edit changed nothing in %s", f)
				}
			}
			rs.Merge(fixture.Parse(t, s, f))
		}
	}
	// the scenario's own ConfigMap (its masqueradeBit), else small's, in IPVS mode
	cm, ok := fixture.Text(t, dir, "kube-proxy-configmap-iptables.yaml")
	if !ok {
		if cm, ok = fixture.Text(t, fixture.Dir("small-v1.37"), "kube-proxy-configmap-iptables.yaml"); !ok {
			t.Fatal("no configmap")
		}
	}
	cfg, err := kpconfig.Parse(strings.NewReader(strings.Replace(cm, "mode: iptables", "mode: ipvs", 1)), "configmap")
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Node    string   `json:"node"`
		NodeIPs []string `json:"nodeIPs"`
	}
	data, err := os.ReadFile(filepath.Join(dir, "meta.json"))
	if err != nil || json.Unmarshal(data, &meta) != nil {
		t.Fatalf("meta.json: %v", err)
	}
	n := &diagnose.Node{Name: meta.Node, Ruleset: rs, Objects: objs, Config: cfg, Kernel: healthyKernel(t)}
	for _, s := range meta.NodeIPs {
		n.Addresses = append(n.Addresses, netip.MustParseAddr(s))
	}
	sc2 := healthySysctls()
	for k, v := range map[string]string{conntrack.SysctlIPVSConntrack: "1", conntrack.SysctlIPVSExpireNodestConn: "1",
		conntrack.SysctlIPVSExpireQuiescent: "1", conntrack.SysctlIPVSConnReuseMode: "1"} {
		sc2[k] = v
	}
	n.Kernel.Sysctls = sysctlBundle(t, sc2)
	return n
}

// On every IPVS fixture, in every form, triage finds no error or warning:
// the only things not checked are kube-proxy's metrics (none was given).
func TestIPVSHealthyFixtures(t *testing.T) {
	for _, sc := range ipvsScenarios {
		for i, table := range append(ipvsTables, "proc-net-ip_vs.txt") {
			side := ipvsSideFiles
			if i == len(ipvsTables) {
				side = procSideFiles // as read live
			}
			t.Run(fmt.Sprintf("%s/%s/%d", sc, table, len(side)), func(t *testing.T) {
				rep := diagnose.Triage(ipvsNodeWith(t, sc, table, nil, nil, side))
				if rep.Mode.Detected != "ipvs" || rep.IPVS == nil || !rep.IPVS.Read {
					t.Fatalf("mode %s, ipvs %+v", rep.Mode.Detected, rep.IPVS)
				}
				for _, f := range rep.Findings {
					if f.Severity != diagnose.SeverityInfo {
						t.Errorf("%s %s %s: %s", f.Severity, f.Area, f.Subject, f.Message)
					}
				}
				for _, g := range rep.NotChecked {
					// the fixture's configuration has no conntrack section
					if !strings.Contains(g.Reason, "metrics") && !strings.Contains(g.Reason, "conntrack configuration") {
						t.Errorf("not checked: %+v", g)
					}
				}
				if len(rep.IPVS.Ports) == 0 {
					t.Error("no Service port judged")
				}
			})
		}
	}
}

// Each fault injected into kube-proxy's own table is found, once, as the
// first finding, with its kind, in every form that can show it.
func TestIPVSFaults(t *testing.T) {
	cases := []struct {
		name, scenario string
		tables         []string
		edit           func(form, text string) string
		edits          map[string]func(text string) string
		sev            diagnose.Severity
		kind, contains string
	}{{
		name: "a real server missing", scenario: "small-v1.37", tables: ipvsTables,
		edit: dropRealServer("10.96.10.1:80", "10.244.1.11:8080"),
		sev:  diagnose.SeverityError, kind: diagnose.ProblemMissingEndpoints, contains: "10.244.1.11:8080 is in the EndpointSlices",
	}, {
		name: "an extra real server", scenario: "small-v1.37", tables: ipvsTables,
		edit: addRealServer("10.96.10.1:80", "10.244.2.99:8080", 1),
		sev:  diagnose.SeverityError, kind: diagnose.ProblemExtraEndpoints, contains: "real server 10.244.2.99:8080 of clusterIP 10.96.10.1:80 is not in the EndpointSlices",
	}, {
		name: "an endpoint in use left at weight 0", scenario: "small-v1.37", tables: ipvsTables,
		edit: setWeight("10.96.10.1:80", "10.244.0.11:8080", 0),
		sev:  diagnose.SeverityError, kind: diagnose.ProblemWeightZero, contains: "at weight 0, so",
	}, {
		name: "a drained real server not removed", scenario: "ipvs-drain-v1.37", tables: ipvsTables[:2],
		edit: setConns("10.96.60.10:53", "10.244.1.60:5353", 0),
		sev:  diagnose.SeverityWarning, kind: diagnose.ProblemDrainedNotRemoved, contains: "at weight 0 and no connections",
	}, {
		name: "a stale virtual server", scenario: "small-v1.37", tables: ipvsTables,
		edit: addVirtualServer("10.96.99.99:80", "10.244.1.99:8080"),
		sev:  diagnose.SeverityWarning, kind: "", contains: "no current Service port has this virtual server",
	}, {
		name: "a cluster IP with no virtual server", scenario: "small-v1.37", tables: ipvsTables,
		edit: dropVirtualServer("10.96.10.6:80"),
		sev:  diagnose.SeverityError, kind: diagnose.ProblemNoVirtualServer, contains: "no IPVS virtual server for clusterIP 10.96.10.6:80",
	}, {
		name: "another scheduler than configured", scenario: "small-v1.37", tables: ipvsTables,
		edit: setScheduler("10.96.10.6:80", "lc"),
		sev:  diagnose.SeverityWarning, kind: diagnose.ProblemScheduler, contains: "schedules with lc, but kube-proxy is configured with rr",
	}, {
		name: "affinity without persistence", scenario: "small-v1.37", tables: ipvsTables,
		edit: dropPersistence("10.96.10.7:80"),
		sev:  diagnose.SeverityWarning, kind: diagnose.ProblemPersistence, contains: "is not persistent",
	}, {
		name: "a non-local endpoint on a Local policy's NodePort", scenario: "topology-v1.37", tables: ipvsTables,
		edit: addRealServer("10.0.0.10:31180", "10.244.1.171:8080", 1),
		sev:  diagnose.SeverityWarning, kind: diagnose.ProblemUnexpected, contains: "although kube-proxy would not use it here",
	}, {
		name: "an ipset member missing", scenario: "small-v1.37", tables: ipvsTables[:1],
		edit: func(_, s string) string { return s + "\n" }, edits: map[string]func(string) string{"ipset-save.txt": withoutLine("add KUBE-NODE-PORT-TCP 30080")},
		sev: diagnose.SeverityError, kind: diagnose.ProblemIPSetMissing, contains: "ipset KUBE-NODE-PORT-TCP lacks 30080",
	}, {
		name: "an ipset member no Service owns", scenario: "small-v1.37", tables: ipvsTables[:1],
		edit: func(_, s string) string { return s + "\n" }, edits: map[string]func(string) string{"ipset-save.txt": func(s string) string { return s + "add KUBE-CLUSTER-IP 10.96.99.1,tcp:80\n" }},
		sev: diagnose.SeverityWarning, kind: "", contains: "1 member no current Service puts in ipset KUBE-CLUSTER-IP: 10.96.99.1,tcp:80",
	}, {
		name: "a cluster IP not bound to kube-ipvs0", scenario: "small-v1.37", tables: ipvsTables[:1],
		edit: func(_, s string) string { return s + "\n" }, edits: map[string]func(string) string{"ip-addr-kube-ipvs0.txt": withoutLine("    inet 10.96.10.6/32")},
		sev: diagnose.SeverityError, kind: diagnose.ProblemNotBound, contains: "10.96.10.6 has a virtual server but is not bound to kube-ipvs0",
	}, {
		name: "an address bound that no Service has", scenario: "small-v1.37", tables: ipvsTables[:1],
		edit: func(_, s string) string { return s + "\n" }, edits: map[string]func(string) string{"ip-addr-kube-ipvs0.txt": func(s string) string {
			return strings.Replace(s, "    inet 10.96.10.6/32", "    inet 10.96.77.7/32 scope global kube-ipvs0\n       valid_lft forever preferred_lft forever\n    inet 10.96.10.6/32", 1)
		}},
		sev: diagnose.SeverityWarning, kind: "", contains: "bound to kube-ipvs0 but no current Service has this address",
	}}
	for _, tc := range cases {
		for _, table := range tc.tables {
			t.Run(tc.name+"/"+table, func(t *testing.T) {
				rep := diagnose.Triage(ipvsNode(t, tc.scenario, table, func(s string) string {
					out := tc.edit(table, s)
					if out == s {
						t.Fatalf("the edit changed nothing in %s", table)
					}
					return out
				}, tc.edits))
				if len(rep.Findings) == 0 {
					t.Fatalf("no finding; not checked %+v", rep.NotChecked)
				}
				f := rep.Findings[0]
				if f.Severity != tc.sev || f.Kind != tc.kind || !strings.Contains(f.Message, tc.contains) {
					t.Fatalf("first finding %s %s %q; want %s %s containing %q; all %+v", f.Severity, f.Kind, f.Message, tc.sev, tc.kind, tc.contains, rep.Findings)
				}
				n := 0
				for _, g := range rep.Findings {
					if g.Severity != diagnose.SeverityInfo {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%d errors and warnings, want the fault alone: %+v", n, rep.Findings)
				}
				if rep.Status != diagnose.StatusProblems {
					t.Errorf("status %s", rep.Status)
				}
			})
		}
	}
}

// withoutLine drops the line that starts with prefix.
func withoutLine(prefix string) func(string) string {
	return func(s string) string {
		var out []string
		for _, l := range strings.SplitAfter(s, "\n") {
			if !strings.HasPrefix(l, prefix) {
				out = append(out, l)
			}
		}
		return strings.Join(out, "")
	}
}

// A load-balancer IP of ipMode Proxy gets no virtual server from
// kube-proxy (proxyutil.IsVIPMode): none is expected, and none missing.
func TestIPVSProxyModeLoadBalancer(t *testing.T) {
	for _, proxyMode := range []bool{false, true} {
		n := ipvsNode(t, "small-v1.37", "ipvsadm-Ln.txt", dropVirtualServer("198.51.100.10:443").withForm("ipvsadm-Ln.txt"), nil)
		if proxyMode {
			for i := range n.Objects.Services {
				svc := n.Objects.Services[i]
				if svc.Namespace == "shop" && svc.Name == "frontend" {
					m := corev1.LoadBalancerIPModeProxy
					for j := range svc.Status.LoadBalancer.Ingress {
						svc.Status.LoadBalancer.Ingress[j].IPMode = &m
					}
				}
			}
		}
		rep := diagnose.Triage(n)
		found := false
		for _, f := range rep.Findings {
			found = found || f.Kind == diagnose.ProblemNoVirtualServer && strings.Contains(f.Message, "198.51.100.10:443")
		}
		if found == proxyMode {
			t.Errorf("ipMode Proxy %v: missing virtual server reported %v; findings %+v", proxyMode, found, rep.Findings)
		}
	}
}

// Read live, the bindings come from the kernel's local routes: a cluster
// IP whose local route is gone is not bound.
func TestIPVSNotBoundFromFIBTrie(t *testing.T) {
	drop := func(s string) string {
		return regexp.MustCompile(`\n +\|-- 10\.96\.10\.6\n +/32 host LOCAL`).ReplaceAllString(s, "")
	}
	n := ipvsNodeWith(t, "small-v1.37", "proc-net-ip_vs.txt", nil, map[string]func(string) string{"proc-net-fib_trie.txt": drop}, procSideFiles)
	rep := diagnose.Triage(n)
	if len(rep.Findings) == 0 || rep.Findings[0].Kind != diagnose.ProblemNotBound || !strings.Contains(rep.Findings[0].Message, "10.96.10.6 has a virtual server but is not bound") {
		t.Fatalf("findings %+v", rep.Findings)
	}
	// IPv6 not read: the IPv6 Service addresses are not checked, and said so
	n = ipvsNodeWith(t, "small-v1.37", "proc-net-ip_vs.txt", nil, nil, procSideFiles[:4])
	rep = diagnose.Triage(n)
	found := false
	for _, g := range rep.NotChecked {
		found = found || strings.Contains(g.Reason, "local IPv6 addresses were not read")
	}
	if !found || rep.Status != diagnose.StatusIncomplete {
		t.Errorf("status %s, not checked %+v", rep.Status, rep.NotChecked)
	}
}

// A table cut in the middle of a line (a paste) is judged for what it
// holds: what the cut lost is not called missing, and the report says
// what it could not check.
func TestIPVSCutPaste(t *testing.T) {
	cut := func(s string) string {
		i := strings.Index(s, "TCP  10.96.10.6:80")
		return s[:i+len("TCP  10.96.1")]
	}
	rep := diagnose.Triage(ipvsNode(t, "small-v1.37", "ipvsadm-Ln.txt", cut, nil))
	for _, f := range rep.Findings {
		if f.Severity == diagnose.SeverityError {
			t.Errorf("error on a cut table: %s", f.Message)
		}
	}
	found := false
	for _, g := range rep.NotChecked {
		found = found || strings.Contains(g.Check, "missing from the table")
	}
	if !found || rep.Status != diagnose.StatusIncomplete {
		t.Errorf("status %s, not checked %+v", rep.Status, rep.NotChecked)
	}
}

// outage-v1.37: every pod of shop/checkout fails its readiness probe and
// kube-proxy syncs; its virtual server keeps no real server, as it
// should. The warning is the pods', and the only one.
func TestIPVSOutage(t *testing.T) {
	for _, table := range ipvsTables {
		rep := diagnose.Triage(ipvsNode(t, "outage-v1.37", table, nil, nil))
		var bad []diagnose.Finding
		for _, f := range rep.Findings {
			if f.Severity != diagnose.SeverityInfo {
				bad = append(bad, f)
			}
		}
		if len(bad) != 1 || bad[0].Kind != diagnose.ProblemNoneReady || !strings.Contains(bad[0].Subject, "shop/checkout") ||
			!strings.Contains(bad[0].Message, "none of its 3 endpoints is ready") {
			t.Errorf("%s: findings %+v; want the one unready Service", table, rep.Findings)
		}
	}
}
