//go:build e2e

package e2e

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// BenchmarkLiveConntrackMillion reads node-a's conntrack table live, as
// users do (`conntrack --node node-a -o json`, one whole plugin process
// timed and its max RSS taken), with N real kernel entries in it: UDP
// flows from one source port to distinct addresses of a subnet routed
// into a sink (ctfill, e2e/testdata/ctfill), and M flows to the cluster IP
// of a UDP Service of its own, DNATed by kube-proxy's rules. 100k and 1M
// show that the plugin's memory does not grow with the table; 1M-capped
// holds more Service entries than the node-side cap (issue 31, item 4).
//
//	E2E_SCALE_NODES=0 go test -tags e2e -count=1 -run '^$' -bench LiveConntrackMillion -benchtime 1x -v ./e2e
//
// It raises the global net.netfilter.nf_conntrack_max (the harness holds
// the machine-wide lock meanwhile) and node-a's UDP timeout (so that no
// entry expires before the read), and puts both back, deletes its entries,
// routes, veth and sink, on every way out.
func BenchmarkLiveConntrackMillion(b *testing.B) {
	f := newCtFill(b, ctFillNode)
	for _, c := range []struct {
		name       string
		flood, vip int
	}{
		{"100k", 100_000, 5_000},
		{"1M", 1_000_000, 5_000},
		{"1M-capped", 1_000_000, 60_000},
	} {
		b.Run(c.name, func(b *testing.B) { f.bench(b, c.flood, c.vip) })
	}
}

const (
	ctFillNode  = "node-a"
	ctFillNS    = "e2e-ctbench"
	ctFillSink  = ctFillNode + "-ctfill" // the sink namespace
	ctFillIf    = "ct-fill"              // the node's side of the veth into it
	ctFillGW    = "169.254.200.2"        // the sink's one address
	ctFillMAC   = "02:63:74:00:00:02"
	ctFillPort  = 9999 // the flood's one source port (outside ip_local_port_range)
	ctFillFirst = 1024 // the Service flows' first source port
	ctUDPTime   = 180  // node-a's UDP timeout meanwhile, seconds
	ctMaxSysctl = "/proc/sys/net/netfilter/nf_conntrack_max"
)

// ctFillNet is the flood's destinations: routed nowhere on the machine nor
// in the node (checked), distinct from every range of the cluster.
var ctFillNet = netip.MustParsePrefix("10.253.0.0/16")

type ctFill struct {
	node    string
	nodeIP  netip.Addr
	vip     netip.Addr
	eps     []string
	bin     string // ctfill
	cleanup []func() error
	once    sync.Once
}

// newCtFill sets up everything the sub-benchmarks share: the fill
// program, the Service, the sink and its routes, the sysctls.
func newCtFill(b *testing.B, node string) *ctFill {
	f := &ctFill{node: node, bin: filepath.Join(b.TempDir(), "ctfill")}
	// Every way out: the benchmark's end (Cleanup), a panic or Fatal
	// (defer, Cleanup), a signal from the harness (^C).
	b.Cleanup(func() { f.undo(b) })
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	stop := make(chan struct{})
	b.Cleanup(func() { signal.Stop(sigs); close(stop) })
	go func() {
		select {
		case s := <-sigs:
			f.undo(b)
			signal.Reset(s)
			syscall.Kill(os.Getpid(), s.(syscall.Signal))
		case <-stop:
		}
	}()
	ok := false
	defer func() {
		if !ok {
			f.undo(b)
		}
	}()
	if out, err := run(nil, "go", "build", "-o", f.bin, filepath.Join(repoRoot, "e2e/testdata/ctfill")); err != nil {
		b.Fatalf("building ctfill: %v\n%s", err, out)
	}
	f.nodeIP, f.eps = ctNodeAddrs(b, node)
	f.checkFree(b)
	f.setSysctls(b)
	f.addService(b)
	f.addSink(b)
	ok = true
	return f
}

// undo runs the cleanups once, last added first, and says what failed.
func (f *ctFill) undo(b *testing.B) {
	f.once.Do(func() {
		for i := len(f.cleanup) - 1; i >= 0; i-- {
			if err := f.cleanup[i](); err != nil {
				b.Errorf("cleaning up: %v", err)
			}
		}
	})
}

func (f *ctFill) onUndo(fn func() error) { f.cleanup = append(f.cleanup, fn) }

// ctNodeAddrs are the node's InternalIP and three endpoint addresses on
// its pod CIDR (.201-.203: no one else's; kernel labs use .250).
func ctNodeAddrs(b *testing.B, node string) (netip.Addr, []string) {
	var obj struct {
		Spec   struct{ PodCIDR string }
		Status struct {
			Addresses []struct{ Type, Address string }
		}
	}
	if err := json.Unmarshal(kubectl(b, "get", "node", node, "-o", "json"), &obj); err != nil {
		b.Fatal(err)
	}
	var ip netip.Addr
	for _, a := range obj.Status.Addresses {
		if a.Type == "InternalIP" {
			ip, _ = netip.ParseAddr(a.Address)
		}
	}
	cidr, err := netip.ParsePrefix(obj.Spec.PodCIDR)
	if err != nil || !ip.Is4() {
		b.Fatalf("node %s: InternalIP %v, podCIDR %q", node, ip, obj.Spec.PodCIDR)
	}
	var eps []string
	for _, h := range []byte{201, 202, 203} {
		a := cidr.Masked().Addr().As4()
		a[3] = h
		eps = append(eps, netip.AddrFrom4(a).String())
	}
	return ip, eps
}

// checkFree: ctFillNet is routed neither on the machine (but by its
// default route) nor in the node, and the sink is not left from a killed run.
func (f *ctFill) checkFree(b *testing.B) {
	probe := ctFillNet.Addr().Next().String()
	host, _ := run(nil, "ip", "-4", "route", "show", "table", "all", "match", probe)
	for _, line := range strings.Split(strings.TrimSpace(string(host)), "\n") {
		if line != "" && !strings.HasPrefix(line, "default ") {
			b.Fatalf("%v is routed on this machine (%s): pick another subnet", ctFillNet, line)
		}
	}
	if out, _ := run(nil, "ip", "-n", f.node, "-4", "route", "show", "table", "all", "match", probe); len(strings.TrimSpace(string(out))) > 0 {
		b.Fatalf("%v is routed in %s: %s", ctFillNet, f.node, out)
	}
	if _, err := run(nil, "ip", "-n", f.node, "link", "show", ctFillIf); err == nil {
		b.Logf("removing %s from %s, left by an earlier run", ctFillIf, f.node)
		run(nil, "ip", "-n", f.node, "link", "del", ctFillIf)
	}
	if _, err := os.Stat("/run/netns/" + ctFillSink); err == nil {
		b.Logf("removing namespace %s, left by an earlier run", ctFillSink)
		run(nil, "ip", "netns", "del", ctFillSink)
	}
}

// setSysctls raises the global nf_conntrack_max (the node's count is
// checked against it) and the node's UDP timeout (unreplied flows live
// 30 s by default: a million must outlive the fill and the read).
func (f *ctFill) setSysctls(b *testing.B) {
	was, err := os.ReadFile(ctMaxSysctl)
	if err != nil {
		b.Fatal(err)
	}
	max := strings.TrimSpace(string(was))
	f.onUndo(func() error { return os.WriteFile(ctMaxSysctl, []byte(max), 0o644) })
	if n, _ := strconv.Atoi(max); n < 1_300_000 {
		b.Logf("net.netfilter.nf_conntrack_max %s → 1300000 meanwhile", max)
		if err := os.WriteFile(ctMaxSysctl, []byte("1300000"), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	const key = "net.netfilter.nf_conntrack_udp_timeout"
	out, err := inNode(f.node, "sysctl", "-n", key)
	if err != nil {
		b.Fatal(err)
	}
	udp := strings.TrimSpace(string(out))
	f.onUndo(func() error { _, err := inNode(f.node, "sysctl", "-qw", key+"="+udp); return err })
	if _, err := inNode(f.node, "sysctl", "-qw", fmt.Sprintf("%s=%d", key, ctUDPTime)); err != nil {
		b.Fatal(err)
	}
}

// addService makes a UDP Service (a DNS of three endpoints on the node) and
// waits for both kube-proxies; it is deleted at the end (no namespace is
// ever, with no controller-manager).
func (f *ctFill) addService(b *testing.B) {
	var eps []endpoint
	for _, ip := range f.eps {
		eps = append(eps, endpoint{ip: ip, node: f.node})
	}
	defs := withNamespace([]svcDef{{name: "dns", ports: []svcPort{{name: "dns", port: 53, target: 5353, proto: "UDP"}}, eps: eps}}, ctFillNS)
	if _, err := run(nil, "kubectl", "get", "namespace", ctFillNS); err != nil {
		createObjects(b, namespaceObjects(ctFillNS)...)
	}
	marks := map[string]syncMark{}
	for _, n := range nodes {
		marks[n] = markSync(b, n)
	}
	objs, svcEvents, sliceEvents := objectsOf(defs)
	f.onUndo(func() error {
		_, err := run(nil, "kubectl", "-n", ctFillNS, "delete", "service,endpointslice", "--all", "--wait=false")
		return err
	})
	createObjects(b, objs...)
	for _, n := range nodes {
		waitSynced(b, marks[n], svcEvents, sliceEvents)
	}
	out := kubectl(b, "-n", ctFillNS, "get", "service", "dns", "-o", "jsonpath={.spec.clusterIP}")
	vip, err := netip.ParseAddr(strings.TrimSpace(string(out)))
	if err != nil {
		b.Fatalf("cluster IP of %s/dns: %q", ctFillNS, out)
	}
	f.vip = vip
}

// addSink makes the sink namespace (one address, forwarding off: it
// swallows every packet, after the node's POSTROUTING has confirmed its
// conntrack entry) and routes into it, from the node, ctFillNet, the
// Service's cluster IP and its endpoints. The node's own addresses and
// routes are not touched, and are checked at the end.
func (f *ctFill) addSink(b *testing.B) {
	before := ctNodeNet(f.node)
	f.onUndo(func() error {
		if now := ctNodeNet(f.node); now != before {
			return fmt.Errorf("%s's addresses and routes at the end:\n%s\nbefore:\n%s", f.node, now, before)
		}
		return nil
	})
	f.onUndo(func() error {
		run(nil, "ip", "-n", f.node, "link", "del", ctFillIf) // its routes go with it
		if _, err := os.Stat("/run/netns/" + ctFillSink); err != nil {
			return nil
		}
		_, err := run(nil, "ip", "netns", "del", ctFillSink)
		return err
	})
	mustRun(b, nil, "ip", "netns", "add", ctFillSink)
	mustRun(b, nil, "ip", "netns", "exec", ctFillSink, "sysctl", "-qw", "net.ipv4.ip_forward=0")
	mustRun(b, []byte(strings.Join([]string{
		"link add " + ctFillIf + " type veth peer name eth0 netns " + ctFillSink + " address " + ctFillMAC,
		"link set " + ctFillIf + " up",
		"neigh replace " + ctFillGW + " lladdr " + ctFillMAC + " dev " + ctFillIf + " nud permanent",
	}, "\n")+"\n"), "ip", "-n", f.node, "-batch", "-")
	mustRun(b, []byte("addr add "+ctFillGW+"/32 dev eth0\nlink set eth0 up\n"), "ip", "-n", ctFillSink, "-batch", "-")
	var routes []string
	for _, dst := range append([]string{ctFillNet.String(), f.vip.String() + "/32"}, ctSlash32(f.eps)...) {
		routes = append(routes, fmt.Sprintf("route add %s via %s dev %s onlink src %s", dst, ctFillGW, ctFillIf, f.nodeIP))
	}
	mustRun(b, []byte(strings.Join(routes, "\n")+"\n"), "ip", "-n", f.node, "-batch", "-")
}

func ctSlash32(ips []string) []string {
	var out []string
	for _, ip := range ips {
		out = append(out, ip+"/32")
	}
	return out
}

// ctNodeNet is the node's IPv4 addresses and routes (every table); it may
// run on the signal's goroutine, so it never stops the benchmark.
func ctNodeNet(node string) string {
	addrs, err := run(nil, "ip", "-n", node, "-4", "-o", "addr", "show")
	routes, err2 := run(nil, "ip", "-n", node, "-4", "route", "show", "table", "all")
	return fmt.Sprint(string(addrs), string(routes), err, err2)
}

// ctBenchReport is what the benchmark reads of `conntrack -o json`.
type ctBenchReport struct {
	Status   string `json:"status"`
	Problems []struct {
		Kind, Severity string
	} `json:"problems"`
	NotChecked []struct {
		Check, Reason string
	} `json:"notChecked"`
	Facts *struct {
		Read   int `json:"read"`
		Groups []struct {
			ServicePort string `json:"servicePort"`
			Entries     int    `json:"entries"`
			Stale       int    `json:"stale"`
		} `json:"groups"`
	} `json:"facts"`
	Collection *struct {
		Files []struct {
			Path, Kind, Command string
			Bytes               int64
			Seconds             float64
		} `json:"files"`
		Warnings  []string               `json:"warnings"`
		Conntrack *collect.ConntrackRead `json:"conntrack"`
	} `json:"collection"`
}

// bench fills the table with flood + vip entries, reads it b.N times and
// checks the last read against the kernel's own listing.
func (f *ctFill) bench(b *testing.B, flood, vip int) {
	b.StopTimer()
	base := f.count(b)
	drop := sync.OnceFunc(func() { f.dropEntries(b, base) })
	b.Cleanup(drop)
	defer drop()
	start := time.Now()
	f.fill(b, "-dst", ctFillNet.String(), "-sport", strconv.Itoa(ctFillPort), "-n", strconv.Itoa(flood))
	fillTook := time.Since(start)
	sent := f.fill(b, "-vip", netip.AddrPortFrom(f.vip, 53).String(), "-sport", strconv.Itoa(ctFillFirst), "-skip", strconv.Itoa(ctFillPort), "-n", strconv.Itoa(vip))
	inTable := f.count(b)
	b.Logf("%d flows in %s (%.0f/s), %d to %v:53; node-a's table: %d entries (%d before)",
		flood, fillTook.Round(time.Millisecond), float64(flood)/fillTook.Seconds(), sent, f.vip, inTable, base)
	if inTable < flood+sent {
		b.Fatalf("node-a's table holds %d entries, want at least %d: the kernel did not track every flow", inTable, flood+sent)
	}
	var r sweepRun
	for range b.N {
		b.StartTimer()
		r = runPlugin(b, nil, "conntrack", "--node", f.node, "-o", "json")
		b.StopTimer()
	}
	rep, onNode := f.check(b, r, flood+sent)
	ct := rep.Collection.Conntrack
	if hwm := vmHWM(); hwm >= r.maxRSSKiB {
		b.Logf("max RSS %d KiB is at most this benchmark's own peak, %d KiB: the plugin's is lower", r.maxRSSKiB, hwm)
	}
	b.ReportMetric(r.took.Seconds(), "s/read")
	b.ReportMetric(float64(r.maxRSSKiB)/1024, "MiB-maxRSS")
	b.ReportMetric(float64(ct.Total), "entries-total")
	b.ReportMetric(float64(ct.Kept), "entries-kept")
	b.ReportMetric(onNode, "s-onnode")
	b.Logf("%s: %d of %d entries kept (%s, %d patterns, capped %v), grep on the node %.2f s; plugin max RSS %d MiB; status %s %+v",
		r, ct.Kept, ct.Total, ct.Filter, ct.Patterns, ct.Capped, onNode, r.maxRSSKiB/1024, rep.Status, rep.Problems)
	f.profile(b, rep)
}

// fill runs ctfill in the node and returns how many datagrams it sent.
func (f *ctFill) fill(b *testing.B, args ...string) int {
	out, err := inNode(f.node, f.bin, append([]string{"-src", f.nodeIP.String()}, args...)...)
	var sent int
	if _, e := fmt.Sscanf(string(out), "sent %d", &sent); err != nil || e != nil {
		b.Fatalf("ctfill %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	if strings.Contains(string(out), "first error") {
		b.Logf("ctfill %s: %s", strings.Join(args, " "), strings.TrimSpace(string(out)))
	}
	return sent
}

// count is the node's nf_conntrack_count (its own namespace's entries).
func (f *ctFill) count(b *testing.B) int {
	out, err := inNode(f.node, "cat", "/proc/sys/net/netfilter/nf_conntrack_count")
	n, e := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || e != nil {
		b.Fatalf("nf_conntrack_count of %s: %v %v", f.node, err, e)
	}
	return n
}

// dropEntries deletes the benchmark's entries: the flood's by its source
// port, the Service's by its cluster IP (no one else sends there).
func (f *ctFill) dropEntries(b *testing.B, base int) {
	start := time.Now()
	// conntrack -D lists every entry it deletes: a million lines, which
	// would raise this process's peak RSS (see vmHWM) if read.
	for _, args := range [][]string{{"--orig-port-src", strconv.Itoa(ctFillPort)}, {"-d", f.vip.String()}} {
		cmd := exec.Command("ip", append([]string{"netns", "exec", f.node, "conntrack", "-D", "-p", "udp"}, args...)...)
		cmd.Run() // exits 1 when there was nothing to delete
	}
	if n := f.count(b); n > base+100 {
		b.Errorf("node-a's table holds %d entries after deleting the benchmark's, %d before them", n, base)
	}
	b.Logf("entries deleted in %s", time.Since(start).Round(time.Millisecond))
}

// kernelCount is how many entries `conntrack -L -d ip` lists in the node.
func (f *ctFill) kernelCount(b *testing.B, ip string) int {
	out, err := run(nil, "bash", "-o", "pipefail", "-c", "ip netns exec "+f.node+" conntrack -L -d "+ip+" | wc -l")
	n, e := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || e != nil {
		b.Fatalf("conntrack -L -d %s in %s: %v %v", ip, f.node, err, e)
	}
	return n
}

// check holds the read to the kernel: the whole table counted, exactly the
// entries of the Services' addresses kept (`conntrack -L -d VIP` for every
// cluster IP), and a read capped on the node reported INCOMPLETE with how
// much was left out. It returns the report and the grep's seconds.
func (f *ctFill) check(b *testing.B, r sweepRun, ours int) (ctBenchReport, float64) {
	var rep ctBenchReport
	if r.code != 0 && r.code != 2 && r.code != 3 {
		b.Fatalf("%s\n%s", r, tail(r.stderr, 2000))
	}
	if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil || rep.Collection == nil || rep.Collection.Conntrack == nil || rep.Facts == nil {
		b.Fatalf("%s: %v, no collection.conntrack or facts\n%s", r, err, tail(r.stdout, 2000))
	}
	ct := rep.Collection.Conntrack
	var onNode float64
	for _, file := range rep.Collection.Files {
		if file.Kind == collect.KindConntrack {
			onNode = file.Seconds
		}
	}
	if ct.Total < int64(ours) {
		b.Errorf("total %d entries reported, the benchmark alone put %d in the table", ct.Total, ours)
	}
	want := 0
	for _, ip := range strings.Fields(string(kubectl(b, "get", "services", "-A", "-o", `jsonpath={range .items[*]}{.spec.clusterIP}{"\n"}{end}`))) {
		if ip != "None" {
			want += f.kernelCount(b, ip)
		}
	}
	vipEntries := f.kernelCount(b, f.vip.String())
	capped := want >= ct.MaxEntries
	switch {
	case !capped && (ct.Capped || ct.Kept != int64(want) || rep.Facts.Read != want):
		b.Errorf("kept %d entries (capped %v), read %d; the kernel lists %d to the Services' cluster IPs", ct.Kept, ct.Capped, rep.Facts.Read, want)
	case capped && (!ct.Capped || ct.Kept != int64(ct.MaxEntries)):
		b.Errorf("kept %d entries (capped %v); the kernel lists %d to the Services' cluster IPs, over the cap %d", ct.Kept, ct.Capped, want, ct.MaxEntries)
	}
	if !capped {
		if got := rep.group(ctFillNS + "/dns:dns"); got != vipEntries {
			b.Errorf("%s/dns:dns: %d entries reported, the kernel lists %d to %v", ctFillNS, got, vipEntries, f.vip)
		}
	}
	gap := rep.incomplete()
	if capped != (gap != "") || capped && rep.Status == "healthy" {
		b.Errorf("capped read %v: status %s, INCOMPLETE gap %q", capped, rep.Status, gap)
	}
	if left := ct.Total - ct.Kept; capped && !strings.Contains(gap, strconv.FormatInt(left, 10)) {
		b.Errorf("capped read: %q does not say how much was left out (%d of the %d entries not read)", gap, left, ct.Total)
	}
	return rep, onNode
}

func (rep ctBenchReport) group(servicePort string) int {
	n := 0
	for _, g := range rep.Facts.Groups {
		if g.ServicePort == servicePort {
			n += g.Entries
		}
	}
	return n
}

// incomplete is the report's gap for entries the read left out, or "".
func (rep ctBenchReport) incomplete() string {
	for _, g := range rep.NotChecked {
		if strings.Contains(g.Check, "INCOMPLETE") {
			return g.Check
		}
	}
	return ""
}

// profile (E2E_CT_PROFILE=1) says where a read's time and memory go: the
// node's table read timed alone (the grep the bundle records), the
// plugin's own steps (its progress lines, shown on a terminal), Go's heap
// (gctrace), and the plugin's max RSS measured by GNU time.
func (f *ctFill) profile(b *testing.B, rep ctBenchReport) {
	if os.Getenv("E2E_CT_PROFILE") == "" {
		return
	}
	for _, file := range rep.Collection.Files {
		if file.Kind != collect.KindConntrack {
			continue
		}
		start := time.Now()
		out, err := run(nil, "bash", "-c", "ip netns exec "+f.node+" "+file.Command+" | wc -c")
		b.Logf("in the node: %s: %s (%s bytes, %v)", tail(file.Command, 80), time.Since(start).Round(time.Millisecond), strings.TrimSpace(string(out)), err)
	}
	dir := b.TempDir()
	cmd := "GODEBUG=gctrace=1 kubectl proxyrules conntrack --node " + f.node + " -o json >" + dir + "/out.json"
	out, _ := run(nil, "script", "-q", "-e", "-c", cmd, "/dev/null")
	var heap []string
	for _, line := range strings.Split(string(out), "\n") {
		if fs := strings.Fields(line); len(fs) > 10 && fs[0] == "gc" {
			for _, f := range fs {
				if strings.Count(f, "->") == 2 {
					heap = append(heap, f)
				}
			}
		} else if strings.TrimSpace(line) != "" {
			b.Logf("plugin: %s", strings.TrimSpace(line))
		}
	}
	b.Logf("plugin heap at each GC (MB before->after->live): %s", strings.Join(heap, " "))
	// Max RSS again, the plugin alone (GNU time forks, not vfork: see vmHWM).
	out, err := run(nil, "bash", "-c", "/usr/bin/time -f '%e s, max RSS %M KiB' -o "+dir+"/time kubectl proxyrules conntrack --node "+f.node+" -o json >/dev/null; cat "+dir+"/time")
	b.Logf("under /usr/bin/time: %s %v", strings.TrimSpace(string(out)), err)
}

// vmHWM is this process's peak RSS in KiB. Go starts a command with
// vfork: until its exec the child shares our memory, and the kernel
// carries that high-water mark into the child's ru_maxrss; so runPlugin's
// maxRSSKiB is the plugin's only while it is above ours.
func vmHWM() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
