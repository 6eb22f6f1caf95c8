package plugin

import (
	"bufio"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

// BenchmarkCommandIPVS is BenchmarkCommand's trace on an IPVS-mode node
// of the same sizes (issue 33: trace ≤ 0.3 s offline): kube-proxy's
// IPVS-mode iptables rules (small-v1.37's: their number does not grow
// with the Services), a /proc/net/ip_vs of every Service's virtual server
// and real servers, and `ipset save` with every set the rules name
// (KUBE-CLUSTER-IP and KUBE-IPVS-IPS holding every cluster IP).
//
//	go test ./plugin -run '^$' -bench 'CommandIPVS' -benchmem
func BenchmarkCommandIPVS(b *testing.B) {
	dir := b.TempDir()
	for _, n := range benchServiceCounts {
		b.Run(fmt.Sprintf("ipvs-%d/trace", n), func(b *testing.B) {
			// b.Run calls this again for each b.N: the files are written once
			sub := filepath.Join(dir, fmt.Sprint(n))
			c := synth.Cluster{Services: n, Endpoints: 20}
			proc, sets := filepath.Join(sub, "proc-net-ip_vs.txt"), filepath.Join(sub, "ipset-save.txt")
			objects := filepath.Join(sub, "objects.json")
			if _, err := os.Stat(sub); err != nil {
				if err := os.Mkdir(sub, 0o755); err != nil {
					b.Fatal(err)
				}
				f, err := c.WriteFiles(sub)
				if err != nil {
					b.Fatal(err)
				}
				objects = f.Objects
				writeIPVSBench(b, c, proc, sets)
			}
			rules := smallDir + "ipvs/iptables-save-nft-ipv4.txt"
			node := benchNode{mode: "ipvs", files: []string{rules, proc, sets, objects},
				vars: map[string]string{"{rules}": rules, "{proc}": proc, "{sets}": sets, "{objects}": objects}}
			benchmarkCommand(b, node, "trace --to svc/svc-00042 -n bench --from-dump {rules} --from-dump {proc} --from-dump {sets} --from-objects {objects} --node "+synth.LocalNode+" --node-ip 10.0.0.10")
		})
	}
}

// writeIPVSBench writes c's IPVS table (rr, weight 1, as kube-proxy
// does) and ipsets: the sets small-v1.37's rules name, created as
// kube-proxy creates them, KUBE-CLUSTER-IP and KUBE-IPVS-IPS filled.
func writeIPVSBench(b *testing.B, c synth.Cluster, proc, sets string) {
	objs := c.Objects()
	hex := func(ap netip.AddrPort) string {
		a := ap.Addr().As4()
		return fmt.Sprintf("%02X%02X%02X%02X:%04X", a[0], a[1], a[2], a[3], ap.Port())
	}
	var p, s strings.Builder
	p.WriteString("IP Virtual Server version 1.2.1 (size=4096)\nProt LocalAddress:Port Scheduler Flags\n  -> RemoteAddress:Port Forward Weight ActiveConn InActConn\n")
	created, err := os.ReadFile(smallDir + "ipvs/ipset-save.txt")
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(strings.NewReader(string(created)))
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "create ") {
			s.WriteString(sc.Text() + "\n")
		}
	}
	for i, svc := range objs.Services {
		vip := netip.AddrPortFrom(netip.MustParseAddr(svc.Spec.ClusterIP), uint16(svc.Spec.Ports[0].Port))
		fmt.Fprintf(&p, "TCP  %s rr  \n", hex(vip))
		for _, ep := range objs.EndpointSlices[i].Endpoints {
			rs := netip.AddrPortFrom(netip.MustParseAddr(ep.Addresses[0]), uint16(*objs.EndpointSlices[i].Ports[0].Port))
			fmt.Fprintf(&p, "  -> %s      Masq    1      0          0         \n", hex(rs))
		}
		fmt.Fprintf(&s, "add KUBE-CLUSTER-IP %s,tcp:%d\nadd KUBE-IPVS-IPS %s\n", vip.Addr(), vip.Port(), vip.Addr())
	}
	for path, text := range map[string]string{proc: p.String(), sets: s.String()} {
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}
