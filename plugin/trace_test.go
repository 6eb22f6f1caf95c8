package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const smallDir = "../testdata/fixtures/small-v1.37/"

func TestTraceGolden(t *testing.T) {
	node := []string{"--node", "node-a", "--node-ip", "10.0.0.10", "--node-ip", "fd00::10"}
	tests := []struct {
		golden   string
		args     []string
		wantExit int
	}{
		// Three endpoints, kube-proxy's probability cascade: a third each.
		{"trace-web-iptables.txt", append([]string{"trace", "--to", "svc/web", "-n", "shop", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt", "--from-objects", smallDir + "objects.json"}, node...), ExitHealthy},
		// externalTrafficPolicy Local, no endpoint on this node: external
		// clients are dropped; the node's own and pods' traffic is not.
		{"trace-reports-local-nftables.txt", append([]string{"trace", "--to", "svc/reports", "-n", "shop", "--from-dump", smallDir + "nftables/ruleset.json", "--from-objects", smallDir + "objects.json"}, node...), ExitProblems},
		// ClientIP affinity read through nft: a new client splits, a
		// returning one keeps its endpoint.
		{"trace-cart-affinity-nft-list.txt", append([]string{"trace", "10.96.10.7:80", "--from-dump", smallDir + "iptables/nft-list.txt", "--from-objects", smallDir + "objects.json"}, node...), ExitIncomplete},
		// No endpoints: rejected.
		{"trace-empty-iptables.txt", append([]string{"trace", "--to", "10.96.10.9:80", "--from", "node", "--from-dump", smallDir + "iptables/save-legacy-ipv4.txt"}, node...), ExitProblems},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, tc.args...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit status %d, want %d\n%s", code, tc.wantExit, errOut)
			}
			checkGolden(t, tc.golden, []byte(out))
		})
	}
}

// TestTraceJSON: the stable schema: outcomes with endpoint (null when not
// DNATed), probability, verdict, masquerade and path; affinity;
// notModelled.
func TestTraceJSON(t *testing.T) {
	out, errOut, err := runCmd(t, nil, "trace", "--to", "svc/cart", "-n", "shop", "--from", "node", "--from-dump", smallDir+"iptables/save-nft-ipv4.txt",
		"--from-dump", smallDir+"iptables/save-nft-ipv6.txt", "--from-objects", smallDir+"objects.json", "--node-ip", "10.0.0.10", "-o", "json")
	if code := exitOf(t, err, errOut); code != ExitIncomplete {
		t.Errorf("exit status %d, want %d (the affinity records are not in the rules)\n%s", code, ExitIncomplete, errOut)
	}
	var rep struct {
		APIVersion, Kind, Status string
		Traces                   []struct {
			Entry, ServicePort, Summary string
			Packet                      struct{ Protocol, Source, Destination, From string }
			Outcomes                    []struct {
				Endpoint    *string
				Probability float64
				Verdict     string
				Masquerade  bool
				Assumes     []struct {
					What  string
					Holds bool
				}
				Path []struct{ Hook, Table, Chain, Action string }
			}
			Affinity    *struct{ TimeoutSeconds int }
			NotModelled []struct{ What string }
			Confirm     []string
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("%v\n%.400s", err, out)
	}
	if rep.APIVersion != APIVersion || rep.Kind != "Trace" || len(rep.Traces) != 1 {
		t.Fatalf("report: %.400s", out)
	}
	tr := rep.Traces[0]
	if tr.Entry != "clusterIP" || tr.ServicePort != "shop/cart:http" || tr.Packet.From != "node" || tr.Packet.Source != "10.0.0.10:40000" {
		t.Errorf("trace: %+v", tr)
	}
	if tr.Affinity == nil || tr.Affinity.TimeoutSeconds != 10800 {
		t.Errorf("affinity: %+v, want a timeout of 10800 s", tr.Affinity)
	}
	newClient := 0.0
	for _, o := range tr.Outcomes {
		if o.Verdict != "dnat" || o.Endpoint == nil || !o.Masquerade || len(o.Path) == 0 {
			t.Errorf("outcome %+v: want a masqueraded DNAT with its path", o)
		}
		pinned := false
		for _, a := range o.Assumes {
			pinned = pinned || a.Holds
		}
		if !pinned {
			newClient += o.Probability
		}
	}
	if newClient < 0.999 || newClient > 1.001 {
		t.Errorf("a new client's outcomes add up to %v, not 1", newClient)
	}
	if len(tr.NotModelled) == 0 || len(tr.Confirm) < 3 || !strings.Contains(strings.Join(tr.Confirm, "\n"), "nft delete table ip proxyrules_trace") {
		t.Errorf("notModelled %v, confirm %q", tr.NotModelled, tr.Confirm)
	}
	// Not DNATed: endpoint null.
	out, _, _ = runCmd(t, nil, "trace", "--to", "10.96.10.9:80", "--from-dump", smallDir+"iptables/save-nft-ipv4.txt", "-o", "json", "--node-ip", "10.0.0.10")
	if !strings.Contains(out, `"endpoint": null`) || !strings.Contains(out, `"verdict": "reject"`) {
		t.Errorf("a rejected connection: %.600s", out)
	}
}

func TestTraceErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"trace", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt"}, "trace needs a destination"},
		{[]string{"trace", "--to", "10.96.0.1", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt"}, "neither IP:PORT"},
		{[]string{"trace", "--to", "10.96.0.1:80/icmp", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt"}, "tcp, udp or sctp"},
		{[]string{"trace", "--to", "svc/web", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt"}, "--from-objects"},
		{[]string{"trace", "--to", "svc/webb", "-n", "shop", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt", "--from-objects", smallDir + "objects.json"}, "web"},
		{[]string{"trace", "--to", "10.96.10.1:80", "--from", "moon", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt"}, "node, pod, outside or an IP"},
		{[]string{"trace", "--to", "10.96.10.1:80", "--from", "node", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt"}, "--node-ip"},
		{[]string{"trace", "--to", "10.96.10.1:80", "--from", "fd00::1", "--from-dump", smallDir + "iptables/save-nft-ipv4.txt"}, "not an IPv4 address"},
	} {
		_, errOut, err := runCmd(t, nil, tc.args...)
		if err == nil || !strings.Contains(err.Error()+errOut, tc.want) {
			t.Errorf("%v: %v %s, want an error saying %q", tc.args, err, errOut, tc.want)
		}
	}
}

// TestTraceLeavesItsService: a trace of one Service reads only its chains
// of a dump; a rule that sends its traffic into another Service's chains
// (here a stale-looking jump put before its own) makes the walk read the
// dump whole, and the answer is that of the whole dump.
func TestTraceLeavesItsService(t *testing.T) {
	text, err := os.ReadFile(smallDir + "iptables/save-nft-ipv4.txt")
	if err != nil {
		t.Fatal(err)
	}
	const own = "-A KUBE-SERVICES -d 10.96.10.1/32 -p tcp -m comment --comment \"shop/web:http cluster IP\" -m tcp --dport 80 -j KUBE-SVC-67NZLRHBNDSAWJRO\n"
	if !strings.Contains(string(text), own) {
		t.Fatal("the fixture no longer has shop/web's KUBE-SERVICES rule")
	}
	// shop/api's chain, reached first
	other := "-A KUBE-SERVICES -d 10.96.10.1/32 -p tcp -m tcp --dport 80 -j KUBE-SVC-RUKNB3TURLFC6SGL\n"
	dump := filepath.Join(t.TempDir(), "dump.txt")
	if err := os.WriteFile(dump, []byte(strings.Replace(string(text), own, other+own, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCmd(t, nil, "trace", "--to", "svc/web", "-n", "shop", "--from-dump", dump, "--from-objects", smallDir+"objects.json",
		"--node", "node-a", "--node-ip", "10.0.0.10", "-o", "json")
	if code := exitOf(t, err, errOut); code != ExitHealthy {
		t.Fatalf("exit %d: %s", code, errOut)
	}
	if !strings.Contains(out, `"endpoint": "10.244.1.21:8080"`) || !strings.Contains(out, `"endpoint": "10.244.2.21:8080"`) || strings.Contains(out, "10.244.0.11:8080") {
		t.Errorf("the traffic goes to shop/api's endpoints; got %.800s", out)
	}
	if strings.Contains(out, "is not in the input") {
		t.Errorf("the walk stopped at a chain the targeted read left out")
	}
}
