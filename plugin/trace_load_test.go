package plugin

import (
	"bytes"
	"context"
	"encoding/json"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

// traceAnswer is `trace svc/ns/name -o json` on req's inputs as
// TraceOptions.Run answers it: on trace's narrowed read, and on the whole
// input when the walk left the Service's chains (fellBack). full reads
// the whole input from the start.
func traceAnswer(t *testing.T, req Request, ns, name string, full bool) (answer string, fellBack bool, l *Loaded) {
	t.Helper()
	tr := diagnose.TraceRequest{Namespace: ns, Service: name, NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.0.10")}}
	load := func(req Request) (string, *Loaded) {
		l, err := (&Loader{ErrOut: &bytes.Buffer{}}).Load(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		rep, err := diagnose.Trace(l.Node, tr)
		if err != nil {
			return "error: " + err.Error(), l
		}
		if l.Narrowed && leftTarget(rep) {
			return "", l
		}
		data, err := json.MarshalIndent(rep, "", " ")
		if err != nil {
			t.Fatal(err)
		}
		return string(data), l
	}
	if !full {
		req.Service, req.Walk = &correlate.ServiceFilter{Namespace: ns, Name: name}, true
		if answer, l = load(req); answer != "" {
			if !l.Narrowed {
				t.Fatalf("svc %s/%s: not narrowed", ns, name)
			}
			return answer, false, l
		}
		req.Service, req.Walk = nil, false
	}
	answer, l = load(req)
	return answer, !full, l
}

// A trace of one Service on its narrowed read answers as on the whole
// input, for every Service of every fixture in every form of its rules.
func TestTraceNarrowedSameAnswer(t *testing.T) {
	for _, dir := range fixture.Scenarios(t) {
		node := fixture.ReadMeta(t, dir).Node
		objs := fixture.Objects(t, dir)
		for _, form := range fixture.Forms(t, dir) {
			t.Run(filepath.Base(dir)+"/"+form.Name, func(t *testing.T) {
				t.Parallel()
				req := Request{Files: InputFiles{Dumps: form.Files, Objects: []string{filepath.Join(dir, "objects.json")}}, Node: node}
				for _, svc := range objs.Services {
					want, _, _ := traceAnswer(t, req, svc.Namespace, svc.Name, true)
					got, _, _ := traceAnswer(t, req, svc.Namespace, svc.Name, false)
					if diff := cmp.Diff(want, got); diff != "" {
						t.Errorf("%s/%s (-full +narrowed):\n%s", svc.Namespace, svc.Name, diff)
					}
				}
			})
		}
	}
}

// On a big node trace's narrowed read holds the fixed chains and the
// Service's own, and of the other Services' only the first's, not even
// declared; its answer is the whole input's, without reading it again.
func TestTraceNarrowedLarge(t *testing.T) {
	f, err := synth.Cluster{Services: 400, Endpoints: 10}.WriteFiles(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// its own chains, and those of the Service whose KUBE-SVC chain comes
	// first, which gives the pod range (cidrChains)
	own := map[string]bool{}
	for _, name := range []string{"svc-00123", "svc-00000"} {
		for _, c := range correlate.ChainsOfService(fixtureServicePorts(t, f.Objects, "bench", name)) {
			own[c] = true
		}
	}
	for _, dump := range []string{f.IPTablesSave, f.NFTJSON} {
		req := Request{Files: InputFiles{Dumps: []string{dump}, Objects: []string{f.Objects}}, Node: synth.LocalNode}
		want, _, _ := traceAnswer(t, req, "bench", "svc-00123", true)
		got, fellBack, l := traceAnswer(t, req, "bench", "svc-00123", false)
		if fellBack {
			t.Errorf("%s: the narrowed walk left the Service's chains", filepath.Base(dump))
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-full +narrowed):\n%s", filepath.Base(dump), diff)
		}
		if !strings.Contains(got, `"verdict": "dnat"`) {
			t.Errorf("%s: no DNAT in %.300s", filepath.Base(dump), got)
		}
		if dump != f.IPTablesSave {
			continue
		}
		for _, tb := range l.Ruleset.IPTables {
			for _, c := range tb.Chains {
				if perServiceChain([]byte(c.Name)) && !own[c.Name] {
					t.Errorf("chain %s of another Service read", c.Name)
					return
				}
			}
		}
	}
}

// fixtureServicePorts are the ports of one Service of an objects file.
func fixtureServicePorts(t *testing.T, path, ns, name string) []*correlate.ServicePort {
	t.Helper()
	objs, err := (&Loader{}).Objects(context.Background(), Request{Files: InputFiles{Objects: []string{path}}})
	if err != nil {
		t.Fatal(err)
	}
	var out []*correlate.ServicePort
	for _, sp := range objs.ServicePorts() {
		if sp.Namespace == ns && sp.Name == name {
			out = append(out, sp)
		}
	}
	return out
}

// The filter keeps the Service's chains (declarations and rules), the
// chains they jump to, the fixed chains, and leaves out the declarations
// and rules of other Services' chains, an empty line for each.
func TestWalkFilter(t *testing.T) {
	dump := twoServicesDump
	got, dropped := walkFilter([]byte(dump), dumpSpans([]byte(dump)), map[string]bool{"KUBE-SVC-AAAA": true})
	want := strings.NewReplacer(":KUBE-SVC-BBBB - [0:0]\n", "\n", ":KUBE-SEP-OTHER - [0:0]\n", "\n",
		"-A KUBE-SVC-BBBB -j KUBE-SEP-OTHER\n", "\n", "-A KUBE-SEP-OTHER -p tcp -m tcp -j DNAT --to-destination 10.0.0.8:80\n", "\n").Replace(dump)
	if diff := cmp.Diff(want, string(got)); diff != "" || dropped != 2 {
		t.Errorf("dropped %d (-want +got):\n%s", dropped, diff)
	}
	// a last line without its newline is dropped and counted too
	last := []byte("*nat\n:KUBE-SVC-BBBB - [0:0]\n-A KUBE-SVC-BBBB -j KUBE-SEP-OTHER")
	got, dropped = walkFilter(last, dumpSpans(last), map[string]bool{})
	if string(got) != "*nat\n\n\n" || dropped != 1 {
		t.Errorf("got %q, dropped %d", got, dropped)
	}
}

// cidrChains keeps, of each table, the KUBE-SVC chains whose first rule a
// trace may take the pod range from: in declaration order, up to the first
// whose first rule surely is `! -s CIDR … -j KUBE-MARK-MASQ`.
func TestCIDRChains(t *testing.T) {
	tests := []struct {
		name, dump string
		want       []string
	}{
		{"declaration order, not the rules'", "*nat\n:KUBE-SVC-B - [0:0]\n:KUBE-SVC-A - [0:0]\n" +
			"-A KUBE-SVC-A ! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -j KUBE-MARK-MASQ\n" +
			"-A KUBE-SVC-B ! -s 10.244.0.0/16 -d 10.96.0.2/32 -p tcp -j KUBE-MARK-MASQ\nCOMMIT\n", []string{"KUBE-SVC-B"}},
		{"one that may be, then one that is", "*nat\n:KUBE-SVC-A - [0:0]\n:KUBE-SVC-B - [0:0]\n:KUBE-SVC-C - [0:0]\n" +
			"-A KUBE-SVC-A -m comment --comment \"!\" -j KUBE-MARK-MASQ\n-A KUBE-SVC-A -j KUBE-SEP-X\n" +
			"-A KUBE-SVC-B ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ\n" +
			"-A KUBE-SVC-C ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ\nCOMMIT\n", []string{"KUBE-SVC-A", "KUBE-SVC-B"}},
		{"no rules, or another first rule", "*nat\n:KUBE-SVC-A - [0:0]\n:KUBE-SVC-B - [0:0]\n:KUBE-SVC-C - [0:0]\n" +
			"-A KUBE-SVC-B -j KUBE-SEP-X\n-A KUBE-SVC-B ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ\n" +
			"[0:0] -A KUBE-SVC-C ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ\nCOMMIT\n", []string{"KUBE-SVC-C"}},
		{"each table", "*nat\n:KUBE-SVC-A - [0:0]\n-A KUBE-SVC-A ! -s 10.244.0.0/16 -j KUBE-MARK-MASQ\nCOMMIT\n" +
			"# Generated by ip6tables-nft-save\n*nat\n:KUBE-SVC-B - [0:0]\n:KUBE-SVC-C - [0:0]\n" +
			"-A KUBE-SVC-B ! -s fd00:10:244::/56 -j KUBE-MARK-MASQ\n-A KUBE-SVC-C ! -s fd00:10:244::/56 -j KUBE-MARK-MASQ\nCOMMIT\n",
			[]string{"KUBE-SVC-A", "KUBE-SVC-B"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.dump)
			if diff := cmp.Diff(tc.want, cidrChains(data, dumpSpans(data))); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// A trace of a Service narrows its read, but not from an IP: whether an
// IP is a pod of the node's may take every EndpointSlice.
func TestTraceNarrows(t *testing.T) {
	tests := []struct {
		req  diagnose.TraceRequest
		want bool
	}{
		{diagnose.TraceRequest{Service: "web"}, true},
		{diagnose.TraceRequest{Service: "web", From: "pod"}, true},
		{diagnose.TraceRequest{Service: "web", From: "outside"}, true},
		{diagnose.TraceRequest{Service: "web", From: "10.244.1.5"}, false},
		{diagnose.TraceRequest{Service: "web", From: "fd00:10:244::5"}, false},
		{diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.10.1:80")}, false},
	}
	for _, tc := range tests {
		if got := traceNarrows(tc.req); got != tc.want {
			t.Errorf("%+v: narrows %v, want %v", tc.req, got, tc.want)
		}
	}
}
