package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestExplainAndStaleGolden(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	const churn = "../testdata/fixtures/large-churn-v1.37/"
	const topo = "../testdata/fixtures/topology-v1.37/"
	tests := []struct {
		golden   string
		args     []string
		wantExit int
	}{
		{"explain-frontend-iptables.txt", []string{"explain", "svc/frontend", "-n", "shop", "--from-dump", small + "iptables/save-nft-ipv4.txt", "--from-objects", small + "objects.json", "--node", "node-a"}, ExitHealthy},
		{"explain-ingress-local-nftables.txt", []string{"explain", "ingress", "-n", "shop", "--port", "http", "--from-dump", small + "nftables/ruleset.txt", "--from-objects", small + "objects.json", "--node", "node-a"}, ExitHealthy},
		{"explain-scaled-down-before-sync.txt", []string{"explain", "svc/svc-001", "-n", "load", "--from-dump", churn + "iptables/restore-ipv4.sync1.txt", "--from-objects", churn + "objects.json", "--node", "node-a"}, ExitProblems},
		{"explain-zonal-nftables.txt", []string{"explain", "svc/zonal-lb", "-n", "topo", "--from-dump", topo + "nftables/ruleset.json", "--from-objects", topo + "objects.json", "--from-objects", topo + "nodes.json", "--node", "node-a"}, ExitHealthy},
		{"explain-zonal-zone-unknown.txt", []string{"explain", "svc/zonal", "-n", "topo", "--from-dump", topo + "iptables/save-nft-ipv4.txt", "--from-objects", topo + "objects.json", "--node", "node-a"}, ExitIncomplete},
		{"stale-churn.txt", []string{"stale", "--from-dump", churn + "iptables/save-legacy-ipv4.txt", "--from-objects", churn + "objects.json", "--from-config", churn + "kube-proxy-configmap-iptables.yaml", "--node", "node-a"}, ExitHealthy},
		// Without the config, when the throttled chains are due rests on
		// the default syncPeriod: said, and so incomplete.
		{"stale-churn-no-config.txt", []string{"stale", "--from-dump", churn + "iptables/save-legacy-ipv4.txt", "--from-objects", churn + "objects.json", "--node", "node-a"}, ExitIncomplete},
		{"stale-healthy.txt", []string{"stale", "--from-dump", small + "nftables/ruleset.json", "--from-objects", small + "objects.json"}, ExitHealthy},
	}
	for _, tc := range tests {
		t.Run(tc.golden, func(t *testing.T) {
			out, errOut, err := runCmd(t, nil, tc.args...)
			if code := exitOf(t, err, errOut); code != tc.wantExit {
				t.Errorf("exit status %d, want %d", code, tc.wantExit)
			}
			checkGolden(t, tc.golden, []byte(out))
		})
	}
}

// exitOf is the exit status a command's error gives.
func exitOf(t *testing.T, err error, errOut string) int {
	t.Helper()
	if err == nil {
		return ExitHealthy
	}
	code, ok := IsExitError(err)
	if !ok {
		t.Fatalf("%v\n%s", err, errOut)
	}
	return code
}

func TestExplainJSON(t *testing.T) {
	const churn = "../testdata/fixtures/large-churn-v1.37/"
	out, errOut, err := runCmd(t, nil, "explain", "svc/svc-002", "-n", "load", "--from-dump", churn+"iptables/restore-ipv4.sync1.txt", "--from-objects", churn+"objects.json", "-o", "json")
	if code := exitOf(t, err, errOut); code != ExitProblems {
		t.Errorf("exit status %d, want %d: the Service's rules lag its slices", code, ExitProblems)
	}
	var rep struct {
		APIVersion, Kind, Status string
		Ports                    []struct {
			ServicePort, Protocol string
			Endpoints             []struct {
				Endpoint          string
				InRules, InSlices bool
				Share             float64
			}
			Problems []struct{ Severity, Message string }
		}
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.APIVersion != APIVersion || rep.Kind != "ServiceExplanation" || len(rep.Ports) != 1 || rep.Ports[0].ServicePort != "load/svc-002:http" {
		t.Fatalf("report: %.300s", out)
	}
	missing := 0
	for _, ep := range rep.Ports[0].Endpoints {
		if ep.InSlices && !ep.InRules {
			missing++
			if ep.Share != 0 {
				t.Errorf("%s: share %v without a rule", ep.Endpoint, ep.Share)
			}
		}
	}
	if missing == 0 || len(rep.Ports[0].Problems) == 0 || rep.Ports[0].Problems[0].Severity != "error" {
		t.Errorf("missing=%d problems=%v", missing, rep.Ports[0].Problems)
	}
}

func TestExplainErrors(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"explain", "svc/web", "-n", "shop", "--from-dump", small + "iptables/save-nft-ipv4.txt"}, "needs the Services and EndpointSlices"},
		{[]string{"explain", "pod/web", "--from-dump", small + "iptables/save-nft-ipv4.txt", "--from-objects", small + "objects.json"}, "takes a Service"},
		{[]string{"explain", "svc/nope", "-n", "shop", "--from-dump", small + "iptables/save-nft-ipv4.txt", "--from-objects", small + "objects.json"}, "not found"},
		{[]string{"explain", "svc/web", "-n", "shop", "--port", "9999", "--from-dump", small + "iptables/save-nft-ipv4.txt", "--from-objects", small + "objects.json"}, "has no port"},
	} {
		_, _, err := runCmd(t, nil, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: err %v, want %q", tc.args, err, tc.want)
		}
	}
}

// explain takes its namespace as kubectl does: -n, else the kubeconfig
// context's namespace, else default.
func TestExplainNamespaceFromContext(t *testing.T) {
	const small = "../testdata/fixtures/small-v1.37/"
	kubeconfig := filepath.Join(t.TempDir(), "config")
	const cfg = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts:
- {name: shop, context: {cluster: c, user: u, namespace: shop}}
- {name: plain, context: {cluster: c, user: u}}
current-context: shop
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	files := []string{"--from-dump", small + "iptables/save-nft-ipv4.txt", "--from-objects", small + "objects.json", "-o", "json"}
	for _, tc := range []struct {
		args []string
		ns   string
		err  string
	}{
		{[]string{"--kubeconfig", kubeconfig}, "shop", ""},
		{[]string{"--kubeconfig", kubeconfig, "--context", "plain"}, "", "default/web not found"},
		{[]string{"--kubeconfig", kubeconfig, "--context", "plain", "-n", "shop"}, "shop", ""},
		{[]string{"--kubeconfig", filepath.Join(t.TempDir(), "none")}, "", "default/web not found"},
	} {
		out, _, err := runCmd(t, nil, append(append([]string{"explain", "svc/web"}, tc.args...), files...)...)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%v: err %v, want %q", tc.args, err, tc.err)
			}
			continue
		}
		var rep struct{ Namespace string }
		if err != nil || json.Unmarshal([]byte(out), &rep) != nil || rep.Namespace != tc.ns {
			t.Errorf("%v: err %v, namespace %q, want %q", tc.args, err, rep.Namespace, tc.ns)
		}
	}
}
