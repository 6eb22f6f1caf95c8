package ifaddr

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// IsLine takes the header, -o and -br lines of ip addr, and nothing of
// ip link, the rule dumps, IPVS or ipset listings.
func TestIsLine(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"3: kube-ipvs0@peer0: <BROADCAST,MULTICAST,NOARP,M-DOWN> mtu 1500 qdisc noop state DOWN group default qlen 1000", true},
		{"5: kube-ipvs0: <BROADCAST,NOARP> mtu 1500 qdisc noop state DOWN group default", true},
		{"1: lo: <LOOPBACK,UP,LOWER_UP> mtu 65536 qdisc noqueue state UNKNOWN group default qlen 1000\r", true},
		{`3: kube-ipvs0    inet 10.96.0.1/32 scope global kube-ipvs0\       valid_lft forever preferred_lft forever`, true},
		{"kube-ipvs0@peer0 DOWN           10.96.0.1/32 10.96.0.10/32 fd00:10:96::b/128 ", true},
		{"kube-ipvs0       UNKNOWN        ", true},
		{"[root@node-a ~]# ip addr show dev kube-ipvs0", true},
		{"$ sudo ip -br a", true},
		{"3: kube-ipvs0@peer0: <NOARP,UP> mtu 1500 qdisc noqueue state UNKNOWN mode DEFAULT group default qlen 1000", false},
		{"    inet 10.96.0.1/32 scope global kube-ipvs0", false}, // alone, could be anything's
		{"    link/ether da:99:a8:e6:a8:30 brd ff:ff:ff:ff:ff:ff", false},
		{"1: foo", false},
		{"ip route show", false},
		{"TCP  10.96.0.1:443 rr", false},
		{"-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT", false},
		{"add KUBE-CLUSTER-IP 10.96.10.6,tcp:80", false},
		{"add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips", false},
		{"kubeproxy_sync_proxy_rules_last_timestamp_seconds 1.7e+09", false},
		{"node-a Ready control-plane 5d v1.37.2", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := IsLine(tc.line); got != tc.want {
			t.Errorf("IsLine(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}

// No line of the rule and IPVS fixtures of the repository is taken.
func TestIsLineFixtures(t *testing.T) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "fixtures", "small-v1.37", "*", "*.txt"))
	if len(files) < 5 {
		t.Fatalf("fixtures: %v", files)
	}
	for _, file := range files {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if IsLine(sc.Text()) && !strings.Contains(file, "ip-addr") {
				t.Errorf("%s: IsLine(%q)", file, sc.Text())
			}
		}
		f.Close()
	}
}
