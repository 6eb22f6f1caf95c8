//go:build kpipvs && !kp134

package main

// `fixturegen ipvs` (only in the -tags kpipvs build fixturegen-v1.37-ipvs, so
// the other builds and their fixtures stay as they were): kube-proxy
// v1.37.2's real IPVS proxier (ipvs.NewProxier, IPv4 and IPv6 combined with
// metaproxier as NewDualStackProxier does) against kube-proxy's own fakes:
// FakeIPVS (pkg/proxy/ipvs/util/testing), FakeIPSet (pkg/proxy/ipvs/ipset/testing),
// FakeNetlinkHandle (pkg/proxy/ipvs/testing) and the fake iptables.

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"unsafe"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	"k8s.io/kubernetes/pkg/proxy/ipvs"
	utilipset "k8s.io/kubernetes/pkg/proxy/ipvs/ipset"
	ipsettest "k8s.io/kubernetes/pkg/proxy/ipvs/ipset/testing"
	netlinktest "k8s.io/kubernetes/pkg/proxy/ipvs/testing"
	utilipvs "k8s.io/kubernetes/pkg/proxy/ipvs/util"
	ipvstest "k8s.io/kubernetes/pkg/proxy/ipvs/util/testing"
	"k8s.io/kubernetes/pkg/proxy/metaproxier"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
)

// ipsetVersion is what FakeIPSet reports: Debian bookworm's ipset, the
// version the fixtures' `ipset save` is produced with.
const ipsetVersion = "7.17"

func init() { ipvsCmd = runIPVS }

// swapNetlink replaces the unexported netlinkHandle of an *ipvs.Proxier:
// NewProxier hard-wires NewNetLinkHandle (proxier.go:373), which would create
// kube-ipvs0 and bind every service IP in the namespace; kube-proxy's own
// NewFakeProxier (proxier_test.go:127-167) puts a FakeNetlinkHandle there.
func swapNetlink(p *ipvs.Proxier, h ipvs.NetLinkHandle) error {
	f := reflect.ValueOf(p).Elem().FieldByName("netlinkHandle")
	if !f.IsValid() {
		return fmt.Errorf("%T has no field netlinkHandle", p)
	}
	f = reflect.NewAt(f.Type(), unsafe.Pointer(f.UnsafeAddr())).Elem()
	f.Set(reflect.ValueOf(h))
	return nil
}

type ipvsRun struct {
	ipvs  *ipvstest.FakeIPVS
	ipset *ipsettest.FakeIPSet
	ipts  map[v1.IPFamily]*iptablestest.FakeIPTables
	// nl are the fake netlink handles: the addresses kube-proxy bound to
	// kube-ipvs0.
	nl map[v1.IPFamily]*netlinktest.FakeNetlinkHandle
}

func newIPVSProxier(ctx context.Context, sc *Scenario, f v1.IPFamily, run *ipvsRun, x *ipvsScenario, rec events.EventRecorder) (*ipvs.Proxier, error) {
	ipt := &nodeIPTables{FakeIPTables: run.ipts[f], monitorDone: make(chan struct{})}
	// NewProxier sets its sysctls on the fake and reads the real kernel's
	// version (utilkernel.GetVersion): on >= 5.9 vs/conn_reuse_mode is left as-is.
	p, err := ipvs.NewProxier(ctx, proxyConfig(sc, "ipvs"), f, ipt, run.ipvs, run.ipset,
		sysctltest.NewFake(), localDetector(f), nodeName, familyNodeIP(f), rec, nil, false)
	if err != nil {
		return nil, err
	}
	nl := netlinktest.NewFakeNetlinkHandle(f == v1.IPv6Protocol)
	run.nl[f] = nl
	// the node's address as kube-proxy's netlink sees it (NodePort virtual servers)
	if err := nl.SetLocalAddresses("eth0", familyNodeIP(f).String()); err != nil {
		return nil, err
	}
	if x.loopback {
		lo := "127.0.0.1"
		if f == v1.IPv6Protocol {
			lo = "::1"
		}
		return p, swapNetlink(p, &loopbackNetlink{FakeNetlinkHandle: nl, loopback: lo})
	}
	return p, swapNetlink(p, nl)
}

func newIPVSRun(ctx context.Context, sc *Scenario, x *ipvsScenario) (*ipvsRun, proxier, error) {
	run := &ipvsRun{
		ipvs:  ipvstest.NewFake(),
		ipset: ipsettest.NewFake(ipsetVersion),
		ipts:  map[v1.IPFamily]*iptablestest.FakeIPTables{},
		nl:    map[v1.IPFamily]*netlinktest.FakeNetlinkHandle{},
	}
	ps := map[v1.IPFamily]proxier{}
	rec := newRecorder()
	for _, f := range families {
		run.ipts[f] = newFakeIPTables(f)
		p, err := newIPVSProxier(ctx, sc, f, run, x, rec)
		if err != nil {
			return nil, nil, fmt.Errorf("ipvs.NewProxier(%s): %w", f, err)
		}
		ps[f] = p
	}
	return run, metaproxier.NewMetaProxier(ps[v1.IPv4Protocol], ps[v1.IPv6Protocol]), nil
}

// runIPVS runs the scenario's syncs: the first with all objects, then (with
// a churn) the churn's events and a second sync, as runIPTables does.
func runIPVS(sc *Scenario, out string) error {
	x := ipvsScenarios[sc.Name]
	if x == nil {
		return fmt.Errorf("ipvs: scenario %s has no IPVS fixture (hack/fixturegen/ipvs_scenarios.go)", sc.Name)
	}
	if sc.ExtraSyncs > 0 || sc.IPTablesSeed != nil {
		return fmt.Errorf("ipvs: scenario %s has extra syncs/seeds, not supported", sc.Name)
	}
	first, final := finalObjects(sc)
	run, mp, err := newIPVSRun(context.Background(), sc, x)
	if err != nil {
		return err
	}
	tellTopology(mp, sc)
	feed(mp, first)
	dir := filepath.Join(out, "ipvs")
	if sc.Churn != nil {
		// the connections clients opened after the first sync, before the churn
		if err := run.setConns(x.conns); err != nil {
			return err
		}
		if err := run.writeTable(dir, ".sync1"); err != nil {
			return err
		}
		applyChurn(mp, first, final)
		syncNow(mp)
		run.keepConns(x.conns)
	}
	svcs, err := run.services()
	if err != nil {
		return err
	}
	if err := writeIPVSMeta(out, ipvsFacts(svcs, x), x); err != nil {
		return err
	}
	return run.write(dir)
}

// services converts the FakeIPVS state into what the kernel would hold.
func (run *ipvsRun) services() ([]ipvsService, error) {
	vss, err := run.ipvs.GetVirtualServers()
	if err != nil {
		return nil, err
	}
	var svcs []ipvsService
	for _, vs := range vss {
		s := ipvsService{
			Addr: vs.Address, Proto: strings.ToUpper(vs.Protocol), Port: vs.Port, Sched: vs.Scheduler,
			Persistent: vs.Flags&utilipvs.FlagPersistent != 0, Timeout: vs.Timeout,
			Netmask: 0xffffffff,
		}
		if vs.Address.To4() == nil {
			s.Netmask = 128
		}
		rss, err := run.ipvs.GetRealServers(vs)
		if err != nil {
			return nil, err
		}
		for _, rs := range rss {
			s.Dests = append(s.Dests, ipvsDest{Addr: rs.Address, Port: rs.Port, Fwd: "Masq",
				Weight: rs.Weight, ActiveConn: rs.ActiveConn, InactiveConn: rs.InactiveConn})
		}
		svcs = append(svcs, s)
	}
	// FakeIPVS lists in map order; libipvs' comparators are not transitive
	// (u32diff), so ipvsadm's order depends on the order it was given:
	// start from one fixed order so that a run gives the same files.
	canonicalIPVS(svcs)
	sortIPVS(svcs)
	return svcs, nil
}

// ipsetRestore is the FakeIPSet state as `ipset restore` input, with the
// create arguments kube-proxy's runner passes (pkg/proxy/ipvs/ipset/ipset.go
// createSet) and its entries, sorted.
func (run *ipvsRun) ipsetRestore() string {
	var names []string
	for n := range run.ipset.Sets {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		set := withRunnerDefaults(*run.ipset.Sets[n])
		fmt.Fprintf(&b, "create %s %s", set.Name, set.SetType)
		switch set.SetType {
		case utilipset.HashIPPortIP, utilipset.HashIPPort, utilipset.HashIPPortNet, utilipset.HashIP:
			fmt.Fprintf(&b, " family %s hashsize %d maxelem %d", set.HashFamily, set.HashSize, set.MaxElem)
		case utilipset.BitmapPort:
			fmt.Fprintf(&b, " range %s", set.PortRange)
		}
		b.WriteString("\n")
	}
	for _, n := range names {
		for _, e := range run.ipset.Entries[n].List() {
			fmt.Fprintf(&b, "add %s %s\n", n, e)
		}
	}
	return b.String()
}

// withRunnerDefaults applies what the real runner's CreateSet applies before
// createSet and FakeIPSet does not: the unexported setIPSetDefaults
// (pkg/proxy/ipvs/ipset/ipset.go:129-148).
func withRunnerDefaults(set utilipset.IPSet) utilipset.IPSet {
	if set.HashSize == 0 {
		set.HashSize = 1024
	}
	if set.MaxElem == 0 {
		set.MaxElem = 65536
	}
	if set.HashFamily == "" {
		set.HashFamily = utilipset.ProtocolFamilyIPV4
	}
	if len(set.SetType) == 0 {
		set.SetType = utilipset.HashIPPort
	}
	if len(set.PortRange) == 0 {
		set.PortRange = utilipset.DefaultPortRange
	}
	return set
}

// writeTable writes the FakeIPVS state as /proc/net/ip_vs, ipvsadm -Ln
// and ipvsadm -Sn print it; suffix ".sync1" names the state after the
// first sync of a churn scenario.
func (run *ipvsRun) writeTable(dir, suffix string) error {
	svcs, err := run.services()
	if err != nil {
		return err
	}
	for name, data := range map[string]string{
		"proc-net-ip_vs": renderProcNetIPVS(svcs),
		"ipvsadm-Ln":     renderIPVSAdmList(svcs),
		"ipvsadm-Sn":     renderIPVSAdmSave(svcs),
	} {
		if err := writeFile(filepath.Join(dir, name+suffix+".txt"), []byte(data)); err != nil {
			return err
		}
	}
	return nil
}

func (run *ipvsRun) write(dir string) error {
	if err := run.writeTable(dir, ""); err != nil {
		return err
	}
	files := map[string]string{
		"ipset-restore.txt": run.ipsetRestore(),
	}
	for _, f := range families {
		files["iptables-restore-"+famSuffix(f)+".txt"] = run.ipts[f].Dump.String()
	}
	for name, data := range files {
		if err := writeFile(filepath.Join(dir, name), []byte(data)); err != nil {
			return err
		}
	}
	if err := loadIPVSState(dir); err != nil {
		return err
	}
	return run.showKubeIPVS0(dir)
}

var saveDate = regexp.MustCompile(`(?m)^(# (?:Generated by .*|Completed)) on .*$`)

// loadIPVSState loads the fakes' ipset and iptables state into the
// namespace with the real tools and reads it back: `ipset save` (the sets
// must exist before `-m set` rules load) and iptables-nft-save. A failed
// load is kept as <name>.stderr.txt (e.g. `-m ipvs` needs xt_ipvs, which a
// kernel without IP_VS lacks).
func loadIPVSState(dir string) error {
	ok, err := runTool(dir, "ipset-restore.txt", "", "ipset", "restore")
	if err != nil || !ok {
		return fmt.Errorf("ipset restore failed (see ipset-restore.stderr.txt): %v", err)
	}
	if _, err := runTool(dir, "", "ipset-save.txt", "ipset", "save"); err != nil {
		return err
	}
	for _, f := range families {
		fs := famSuffix(f)
		bin := "iptables"
		if f == v1.IPv6Protocol {
			bin = "ip6tables"
		}
		ok, err := runTool(dir, "iptables-restore-"+fs+".txt", "", bin+"-nft-restore")
		if err != nil {
			return err
		}
		if !ok {
			continue // nothing loaded: a restore is all or nothing
		}
		if _, err := runTool(dir, "", "iptables-save-nft-"+fs+".txt", bin+"-nft-save"); err != nil {
			return err
		}
	}
	// after the iptables load, so References counts kube-proxy's -m set rules
	_, err = runTool(dir, "", "ipset-list.txt", "ipset", "list")
	return err
}

// runTool runs a tool with stdin from dir/in (if set), writes stdout to
// dir/out (if set; iptables-save dates removed) and, when it fails, its
// stderr to dir/<in or out>.stderr.txt and reports !ok instead of failing.
func runTool(dir, in, out string, argv ...string) (bool, error) {
	cmd := exec.Command(argv[0], argv[1:]...)
	if in != "" {
		data, err := os.ReadFile(filepath.Join(dir, in))
		if err != nil {
			return false, err
		}
		cmd.Stdin = bytes.NewReader(data)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		name := strings.TrimSuffix(in+out, ".txt") + ".stderr.txt"
		if _, ok := err.(*exec.ExitError); !ok {
			return false, fmt.Errorf("%s: %w", strings.Join(argv, " "), err)
		}
		return false, writeFile(filepath.Join(dir, name), stderr.Bytes())
	}
	if out == "" {
		return true, nil
	}
	return true, writeFile(filepath.Join(dir, out), saveDate.ReplaceAll(stdout.Bytes(), []byte("$1")))
}
