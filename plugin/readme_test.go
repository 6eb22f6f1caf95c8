package plugin

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// readmeSnippets are the commands whose real output the README shows
// between <!-- snippet:NAME --> and <!-- /snippet -->. Run with -update to
// rewrite them; the test fails when the README drifts from the real output.
const (
	demo  = "testdata/fixtures/large-churn-v1.37/"
	fault = "testdata/fixtures/sync-failure-v1.37/"
)

const small = "testdata/fixtures/small-v1.37/"

// drain is kube-proxy's IPVS state with a TCP real server draining.
const drain = "testdata/fixtures/ipvs-drain-v1.37/"

// ct holds the saved kernel state of the conntrack examples.
const ct = "plugin/testdata/conntrack/"

var readmeSnippets = []struct {
	name string
	// shown is the command as the README shows it; args run it here
	// (paths relative to the repository root), grep filters lines.
	shown string
	args  []string
	grep  string
	head  int
	tail  int
}{
	{
		name: "trace",
		shown: "kubectl proxyrules trace --to 198.51.100.10:443 --from 203.0.113.9 --node node-a --node-ip 10.0.0.10 \\\n" +
			"    --from-dump " + small + "iptables/save-nft-ipv4.txt --from-objects " + small + "objects.json",
		args: []string{"trace", "--to", "198.51.100.10:443", "--from", "203.0.113.9", "--node", "node-a", "--node-ip", "10.0.0.10",
			"--from-dump", small + "iptables/save-nft-ipv4.txt", "--from-objects", small + "objects.json"},
	},
	{
		name:  "map-demo",
		shown: "kubectl proxyrules map -n load --from-dump " + demo + "iptables/save-nft-ipv4.txt \\\n    --from-objects " + demo + "objects.json | grep -E 'SERVICE|load/svc-00[0-3]:http +service|stale|KUBE-SVC-24GJ|KUBE-SEP-H33C|chains'",
		args:  []string{"map", "-n", "load", "--from-dump", demo + "iptables/save-nft-ipv4.txt", "--from-objects", demo + "objects.json"},
		grep:  `SERVICE|load/svc-00[0-3]:http +service|stale|KUBE-SVC-24GJ|KUBE-SEP-H33C|chains`,
	},
	{
		name:  "map-lookup",
		shown: "kubectl proxyrules map KUBE-SEP-BBCMKYFKDNTM4EJG --from-dump " + fault + "iptables/save-nft-ipv4.txt \\\n    --from-objects " + fault + "objects.json",
		args:  []string{"map", "KUBE-SEP-BBCMKYFKDNTM4EJG", "--from-dump", fault + "iptables/save-nft-ipv4.txt", "--from-objects", fault + "objects.json"},
	},
	{
		name:  "map-lookup-objects",
		shown: "kubectl proxyrules map 67NZLRHBNDSAWJRO KHN6ECMT --from-objects " + fault + "objects.json",
		args:  []string{"map", "67NZLRHBNDSAWJRO", "KHN6ECMT", "--from-objects", fault + "objects.json"},
	},
	{
		name: "triage",
		shown: "kubectl proxyrules triage --from-dump " + fault + "iptables/save-nft-ipv4.txt \\\n    --from-objects " + fault + "objects.json --from-metrics " + fault + "metrics-iptables.txt \\\n" +
			"    --from-config " + fault + "kube-proxy-configmap-iptables.yaml --node node-a | head -32",
		args: []string{"triage", "--from-dump", fault + "iptables/save-nft-ipv4.txt", "--from-objects", fault + "objects.json",
			"--from-metrics", fault + "metrics-iptables.txt", "--from-config", fault + "kube-proxy-configmap-iptables.yaml", "--node", "node-a"},
		head: 32,
	},
	{
		name: "triage-healthy",
		shown: "kubectl proxyrules triage --from-dump " + demo + "iptables/save-nft-ipv4.txt \\\n    --from-dump " + demo + "iptables/save-nft-ipv6.txt --from-objects " + demo + "objects.json \\\n" +
			"    --from-metrics " + demo + "metrics-iptables.txt --from-config " + demo + "kube-proxy-configmap-iptables.yaml --node node-a --at 1795939150 \\\n" +
			"    --from-conntrack " + ct + "empty-table.txt --from-sysctls " + ct + "sysctls-healthy.txt \\\n" +
			"    --from-conntrack-stats " + ct + "stats-1.txt --from-conntrack-stats " + ct + "stats-2.txt",
		args: []string{"triage", "--from-dump", demo + "iptables/save-nft-ipv4.txt", "--from-dump", demo + "iptables/save-nft-ipv6.txt",
			"--from-objects", demo + "objects.json", "--from-metrics", demo + "metrics-iptables.txt", "--from-config", demo + "kube-proxy-configmap-iptables.yaml",
			"--node", "node-a", "--at", "1795939150", "--from-conntrack", "../" + ct + "empty-table.txt", "--from-sysctls", "../" + ct + "sysctls-healthy.txt",
			"--from-conntrack-stats", "../" + ct + "stats-1.txt", "--from-conntrack-stats", "../" + ct + "stats-2.txt"},
	},
	{
		name:  "explain",
		shown: "kubectl proxyrules explain svc/frontend -n shop --from-dump testdata/fixtures/small-v1.37/iptables/save-nft-ipv4.txt \\\n    --from-objects testdata/fixtures/small-v1.37/objects.json --node node-a",
		args:  []string{"explain", "svc/frontend", "-n", "shop", "--from-dump", "testdata/fixtures/small-v1.37/iptables/save-nft-ipv4.txt", "--from-objects", "testdata/fixtures/small-v1.37/objects.json", "--node", "node-a"},
	},
	{
		name: "explain-ipvs",
		shown: "kubectl proxyrules explain svc/dns -n drain --node node-a --node-ip 10.0.0.10 \\\n" +
			"    --from-dump " + drain + "ipvs/ipvsadm-Ln.txt --from-dump " + drain + "ipvs/ipset-save.txt \\\n" +
			"    --from-dump " + drain + "ipvs/ip-addr-kube-ipvs0.txt --from-objects " + drain + "objects.json \\\n" +
			"    --from-config plugin/" + ipvsConfig,
		args: []string{"explain", "svc/dns", "-n", "drain", "--node", "node-a", "--node-ip", "10.0.0.10", "--from-dump", drain + "ipvs/ipvsadm-Ln.txt",
			"--from-dump", drain + "ipvs/ipset-save.txt", "--from-dump", drain + "ipvs/ip-addr-kube-ipvs0.txt", "--from-objects", drain + "objects.json",
			"--from-config", "../plugin/" + ipvsConfig},
	},
	{
		name: "trace-ipvs",
		shown: "kubectl proxyrules trace --to svc/web -n shop --node node-a --node-ip 10.0.0.10 \\\n" +
			"    --from-dump " + small + "ipvs/iptables-save-nft-ipv4.txt --from-dump " + small + "ipvs/proc-net-ip_vs.txt \\\n" +
			"    --from-dump " + small + "ipvs/ipset-save.txt --from-dump " + small + "ipvs/ip-addr-kube-ipvs0.txt \\\n" +
			"    --from-objects " + small + "objects.json | head -12",
		args: []string{"trace", "--to", "svc/web", "-n", "shop", "--node", "node-a", "--node-ip", "10.0.0.10",
			"--from-dump", small + "ipvs/iptables-save-nft-ipv4.txt", "--from-dump", small + "ipvs/proc-net-ip_vs.txt",
			"--from-dump", small + "ipvs/ipset-save.txt", "--from-dump", small + "ipvs/ip-addr-kube-ipvs0.txt", "--from-objects", small + "objects.json"},
		head: 12,
	},
	{
		name: "explain-conntrack",
		shown: "kubectl proxyrules explain svc/kube-dns -n kube-system --from-dump " + small + "iptables/save-nft-ipv4.txt \\\n" +
			"    --from-objects " + small + "objects.json --node node-a --from-conntrack " + ct + "faulty-table.txt | tail -6",
		args: []string{"explain", "svc/kube-dns", "-n", "kube-system", "--from-dump", small + "iptables/save-nft-ipv4.txt", "--from-objects", small + "objects.json",
			"--node", "node-a", "--from-conntrack", "../" + ct + "faulty-table.txt"},
		tail: 6,
	},
	{
		name:  "stale",
		shown: "kubectl proxyrules stale --from-dump " + demo + "iptables/save-nft-ipv4.txt --from-objects " + demo + "objects.json | tail -7",
		args:  []string{"stale", "--from-dump", demo + "iptables/save-nft-ipv4.txt", "--from-objects", demo + "objects.json"},
		tail:  7,
	},
	{
		name:  "masq",
		shown: "kubectl proxyrules masq --from-dump testdata/fixtures/masq-bit15-v1.37/iptables/save-nft-ipv4.txt",
		args:  []string{"masq", "--from-dump", "testdata/fixtures/masq-bit15-v1.37/iptables/save-nft-ipv4.txt"},
	},
	{
		name: "counts",
		shown: "kubectl proxyrules counts --from-dump " + demo + "iptables/save-nft-ipv4.txt --from-metrics " + demo + "metrics-iptables.txt \\\n" +
			"    --from-objects " + demo + "objects.json --at 1795939150",
		args: []string{"counts", "--from-dump", demo + "iptables/save-nft-ipv4.txt", "--from-metrics", demo + "metrics-iptables.txt", "--from-objects", demo + "objects.json", "--at", "1795939150"},
	},
}

func renderSnippet(t *testing.T, name, shown string, args []string, grep string, head, tail int) string {
	t.Helper()
	for i, a := range args {
		if strings.HasPrefix(a, "testdata/") {
			args[i] = "../" + a
		}
	}
	out, errOut, err := runCmd(t, nil, args...)
	if _, ok := IsExitError(err); ok {
		err = nil // triage reporting problems
	}
	if err != nil {
		t.Fatalf("%s: %v\n%s", name, err, errOut)
	}
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if grep != "" {
		re := regexp.MustCompile(grep)
		var kept []string
		for _, l := range lines {
			if re.MatchString(l) {
				kept = append(kept, l)
			}
		}
		lines = kept
	}
	if head > 0 && len(lines) > head {
		lines = lines[:head]
	}
	if tail > 0 && len(lines) > tail {
		lines = lines[len(lines)-tail:]
	}
	return fmt.Sprintf("<!-- snippet:%s -->\n```console\n$ %s\n%s\n```\n<!-- /snippet -->", name, shown, strings.Join(lines, "\n"))
}

func TestReadmeSnippets(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	for _, s := range readmeSnippets {
		re := regexp.MustCompile(`(?s)<!-- snippet:` + regexp.QuoteMeta(s.name) + ` -->.*?<!-- /snippet -->`)
		if !re.MatchString(text) {
			t.Errorf("README.md has no snippet %q", s.name)
			continue
		}
		want := renderSnippet(t, s.name, s.shown, append([]string(nil), s.args...), s.grep, s.head, s.tail)
		got := re.FindString(text)
		if got != want {
			if *update {
				text = strings.Replace(text, got, want, 1)
				continue
			}
			t.Errorf("README snippet %q is out of date (go test ./plugin -run Readme -update):\n got %s\nwant %s", s.name, got, want)
		}
	}
	if *update && text != string(readme) {
		if err := os.WriteFile("../README.md", []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
