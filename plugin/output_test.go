package plugin

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
)

// shellSafeName is a -o name line a shell takes unquoted: KIND/NAME, one
// slash, nothing a shell expands or splits.
var shellSafeName = regexp.MustCompile(`^[a-z]+/[A-Za-z0-9._:@%+=,-]+$`)

func TestShellName(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"KUBE-SVC-67NZLRHBNDSAWJRO", "KUBE-SVC-67NZLRHBNDSAWJRO"},
		// nftables chains name their Service port with slashes
		{"endpoint-O5JCUGGF-shop/cart/tcp/http__10.244.0.81/8080", "endpoint-O5JCUGGF-shop.cart.tcp.http__10.244.0.81.8080"},
		// triage: area-subject, the subject with blanks and parentheses
		{"service-shop/api:http-(iptables-IPv4)", "service-shop.api:http-iptables-IPv4"},
		{"masquerade iptables IPv4", "masquerade.iptables.IPv4"},
		// explain, masq, counts
		{"shop/api:http/iptables/IPv4", "shop.api:http.iptables.IPv4"},
		{"IPv6/nat", "IPv6.nat"},
		// trace: an IPv6 address in brackets (a glob to a shell)
		{"[fd00:10:96::a]:80-DNAT-[fd00:10:244::5]:8080-1", "fd00:10:96::a:80-DNAT-fd00:10:244::5:8080-1"},
		{"a  /  b", "a.b"},
		{"$(rm -rf x)*?'\"`;&|<>!~#", "rm.-rf.x"},
		{"()", "-"},
	} {
		got := shellName(c.in)
		if got != c.want {
			t.Errorf("shellName(%q) = %q, want %q", c.in, got, c.want)
		}
		if !shellSafeName.MatchString("kind/" + got) {
			t.Errorf("shellName(%q) = %q is not shell-safe", c.in, got)
		}
	}
}

// The templates see the whole report: its top-level fields ({.status},
// {.verdict}, {.kind}) and its rows as items, as before.
func TestTemplatesSeeWholeReport(t *testing.T) {
	in := syncFailureInputs()
	triage := append([]string{"triage"}, in...)
	var rep struct {
		Kind, Status, Verdict string
		Findings              []struct{ Severity string }
	}
	if err := json.Unmarshal([]byte(runOK(t, append(triage, "-o", "json")...)), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Verdict == "" || rep.Status == "" || len(rep.Findings) == 0 {
		t.Fatalf("fixture gives no verdict: %+v", rep)
	}
	var sev []string
	for _, f := range rep.Findings {
		sev = append(sev, f.Severity)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(triage, "-o", `jsonpath={.status}|{.verdict}|{.kind}`), rep.Status + "|" + rep.Verdict + "|Triage"},
		{append(triage, "-o", `go-template={{.status}}|{{.verdict}}`), rep.Status + "|" + rep.Verdict},
		{append(triage, "-o", `jsonpath={.items[*].severity}`), strings.Join(sev, " ")},
		{append(triage, "-o", `go-template={{len .items}}`), itoa(int64(len(rep.Findings)))},
		// explain -l: items are the rows (the ports), not the Services
		{append([]string{"explain", "-l", "k8s-app=kube-dns", "-A"}, append(in, "-o", `jsonpath={.kind} {.items[*].servicePort}`)...), "ServiceExplanationList kube-system/kube-dns:dns kube-system/kube-dns:dns-tcp kube-system/kube-dns:metrics"},
		{append([]string{"masq"}, append(in, "-o", `jsonpath={.kind} {.status} {.items[*].mode}`)...), "MasqueradeReport incomplete iptables iptables"},
	} {
		if got := runOK(t, c.args...); got != c.want {
			t.Errorf("%v: %q, want %q", c.args[len(c.args)-1], got, c.want)
		}
	}
}

// -o wide is accepted wherever -o is: the text where there is nothing
// wider (the analysis commands are in TestOutputFormsOnEveryCommand).
func TestWideIsTextWithoutWiderForm(t *testing.T) {
	a, b := syncFailure+"iptables/save-legacy-ipv4.txt", syncFailure+"iptables/save-nft-ipv4.txt"
	for _, args := range [][]string{
		{"diff", "--from-dump", a, "--from-dump", b, "--from-objects", syncFailure + "objects.json"},
		{"version"},
	} {
		text, _, errText := runCmd(t, nil, args...)
		wide, errOut, err := runCmd(t, nil, append(args, "-o", "wide")...)
		if _, isExit := IsExitError(err); err != nil && !isExit {
			t.Fatalf("%s -o wide: %v\n%s", args[0], err, errOut)
		}
		if (err == nil) != (errText == nil) || wide != text {
			t.Errorf("%s -o wide:\n%s\nwant the text:\n%s", args[0], wide, text)
		}
	}
}
