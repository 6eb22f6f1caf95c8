package plugin

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
)

// ipvsConfig is small-v1.37's kube-proxy ConfigMap with mode: ipvs (the
// fixture generator writes the iptables and nftables ones).
const ipvsConfig = "testdata/kube-proxy-configmap-ipvs.yaml"

// explain on an IPVS node shows each frontend's virtual server and real
// servers, judged (issue 32, item 3).
func TestExplainIPVSGolden(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	const drain = "../testdata/fixtures/ipvs-drain-v1.37/"
	const topo = "../testdata/fixtures/topology-v1.37/"
	table, err := os.ReadFile(small + "ipvs/ipvsadm-Ln.txt")
	if err != nil {
		t.Fatal(err)
	}
	// a real server of shop/web gone from the table: pasted on stdin
	lost := strings.Replace(string(table), "  -> 10.244.1.11:8080             Masq    1      0          0         \n", "", 1)
	if lost == string(table) {
		t.Fatal("the edit changed nothing")
	}
	tests := []struct {
		golden   string
		stdin    string
		args     []string
		wantExit int
	}{
		{"explain-web-ipvs.txt", "", []string{"explain", "svc/web", "-n", "shop", "--from-dump", small + "ipvs/proc-net-ip_vs.txt", "--from-dump", small + "ipvs/iptables-save-nft-ipv4.txt", "--from-dump", small + "ipvs/ipset-list.txt", "--from-dump", small + "ipvs/ip-addr-kube-ipvs0.txt",
			"--from-objects", small + "objects.json", "--from-config", ipvsConfig, "--node", "node-a", "--node-ip", "10.0.0.10"}, ExitHealthy},
		{"explain-api-ipvs-lost-real-server.txt", lost, []string{"explain", "svc/web", "-n", "shop", "--from-dump", "-",
			"--from-objects", small + "objects.json", "--from-config", ipvsConfig, "--node", "node-a", "--node-ip", "10.0.0.10"}, ExitProblems},
		{"explain-dns-ipvs-draining.txt", "", []string{"explain", "svc/dns", "-n", "drain", "--from-dump", drain + "ipvs/ipvsadm-Ln.txt", "--from-dump", drain + "ipvs/ipset-save.txt", "--from-dump", drain + "ipvs/proc-net-fib_trie.txt", "--from-dump", drain + "ipvs/proc-net-if_inet6.txt",
			"--from-objects", drain + "objects.json", "--from-config", ipvsConfig, "--node", "node-a", "--node-ip", "10.0.0.10"}, ExitHealthy},
		{"explain-zonal-lb-ipvs-local.txt", "", []string{"explain", "svc/zonal-lb", "-n", "topo", "--from-dump", topo + "ipvs/ipvsadm-Sn.txt", "--from-dump", topo + "ipvs/ipset-save.txt", "--from-dump", topo + "ipvs/ip-addr-kube-ipvs0.txt",
			"--from-objects", topo + "objects.json", "--from-objects", topo + "nodes.json", "--from-config", ipvsConfig, "--node", "node-a"}, ExitHealthy},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, []byte(tc.stdin), tc.args...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit status %d, want %d\n%s", code, tc.wantExit, out)
			}
			checkGolden(t, tc.golden, []byte(out))
		})
	}
}

// In -o json an IPVS explanation's ports are under "ipvs", and "ports"
// (the iptables walk) is empty.
func TestExplainIPVSJSON(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	out, errOut, err := runCmd(t, nil, "explain", "svc/cart", "-n", "shop", "--from-dump", small+"ipvs/ipvsadm-Sn.txt", "--from-dump", small+"ipvs/ipset-save.txt", "--from-dump", small+"ipvs/ip-addr-kube-ipvs0.txt",
		"--from-objects", small+"objects.json", "--from-config", ipvsConfig, "--node", "node-a", "-o", "json")
	if code := exitOf(t, err, errOut); code != ExitHealthy {
		t.Fatalf("exit %d\n%s", code, out)
	}
	var rep struct {
		Ports []any `json:"ports"`
		IPVS  []struct {
			ServicePort string `json:"servicePort"`
			Frontends   []struct {
				Kind          string `json:"kind"`
				VirtualServer string `json:"virtualServer"`
				RealServers   []struct {
					Addr     string `json:"addr"`
					Expected bool   `json:"expected"`
				} `json:"realServers"`
			} `json:"frontends"`
		} `json:"ipvs"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Ports == nil || len(rep.Ports) != 0 || len(rep.IPVS) != 1 {
		t.Fatalf("ports %v, ipvs %+v", rep.Ports, rep.IPVS)
	}
	fe := rep.IPVS[0].Frontends[0]
	if fe.Kind != "clusterIP" || fe.VirtualServer != "TCP 10.96.10.7:80 rr persistent 10800" || len(fe.RealServers) != 2 || !fe.RealServers[0].Expected {
		t.Errorf("frontend %+v", fe)
	}
}
