package plugin

import (
	"context"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// loadRequest loads req offline, quietly.
func loadRequest(req Request) (*Loaded, error) {
	return (&Loader{ErrOut: io.Discard}).Load(context.Background(), req)
}

// A request whose objects are already read (a sweep's, explain's after it
// resolved its Service) gives the answer of the same objects read from
// their file, whole and narrowed to one Service, and reads no objects file.
func TestLoadGivenObjectsSameAnswer(t *testing.T) {
	dir := smallFixture
	objs := fixture.Objects(t, dir)
	fromFile := Request{Files: InputFiles{Dumps: []string{dir + "iptables/save-nft-ipv4.txt"}, Objects: []string{dir + "objects.json"}}, Node: "node-a"}
	given := fromFile
	given.Files.Objects = []string{"does-not-exist.json"} // never opened
	given.Objects = objs
	for _, svc := range objs.Services {
		for _, narrow := range []bool{false, true} {
			ns, name := "", ""
			if narrow {
				ns, name = svc.Namespace, svc.Name
			}
			want, wantErr := explainJSON(loadFor(t, fromFile, ns, name), svc.Namespace, svc.Name)
			l := loadFor(t, given, ns, name)
			got, err := explainJSON(l, svc.Namespace, svc.Name)
			if (err == nil) != (wantErr == nil) {
				t.Fatalf("%s narrowed %v: error %v, from the file: %v", svc.Name, narrow, err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("%s narrowed %v (-file +given):\n%s", svc.Name, narrow, diff)
			}
			if narrow && len(l.Objects.Services) != 1 || !narrow && l.Objects != objs {
				t.Errorf("%s narrowed %v: %d Services", svc.Name, narrow, len(l.Objects.Services))
			}
		}
	}
}

// Load reads a copy: the request it was given is not changed, and the
// node a bundle names is the result's, not the request's.
func TestLoadLeavesRequestAlone(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, [][2]string{
		{smallFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
		{smallFixture + "objects.json", collect.KindObjects},
		{smallFixture + "metrics-iptables.txt", collect.KindMetrics},
	})
	metrics := make([]string, 1, 4) // room to append into
	metrics[0] = smallFixture + "metrics-nftables.txt"
	req := Request{Files: InputFiles{Bundles: []string{dir}, Metrics: metrics}}
	before := req
	l, err := loadRequest(req)
	if err != nil {
		t.Fatal(err)
	}
	if l.Node.Name != "node-a" || len(l.Metrics) != 2 || l.Objects == nil {
		t.Errorf("node %q, %d metrics, objects %v", l.Node.Name, len(l.Metrics), l.Objects != nil)
	}
	if diff := cmp.Diff(before, req, cmp.AllowUnexported(Request{})); diff != "" || req.Node != "" {
		t.Errorf("request changed:\n%s", diff)
	}
	if extra := metrics[:2][1]; extra != "" {
		t.Errorf("Load wrote %q past the request's list", extra)
	}
}

// One loader, three requests: a whole node, one Service of it, and the
// nodes of a sweep folder, each read from what its request names.
func TestOneLoaderThreeRequests(t *testing.T) {
	ld := &Loader{ErrOut: io.Discard}
	ctx := context.Background()
	whole := Request{Files: InputFiles{Dumps: []string{smallFixture + "iptables/save-nft-ipv4.txt"}, Objects: []string{smallFixture + "objects.json"}}, Node: "node-a"}
	full, err := ld.Load(ctx, whole)
	if err != nil {
		t.Fatal(err)
	}
	one := whole
	one.Service = &correlate.ServiceFilter{Namespace: "kube-system", Name: "kube-dns"}
	targeted, err := ld.Load(ctx, one)
	if err != nil {
		t.Fatal(err)
	}
	if full.Narrowed || !targeted.Narrowed || len(targeted.Objects.Services) != 1 || ruleCount(targeted) >= ruleCount(full) {
		t.Errorf("whole: narrowed %v; one Service: narrowed %v, %d Services, %d of %d rules", full.Narrowed, targeted.Narrowed, len(targeted.Objects.Services), ruleCount(targeted), ruleCount(full))
	}
	sweepDir := sweepFolder(t)
	src, err := ld.offlineSweep(ctx, Request{Files: InputFiles{Bundles: []string{sweepDir}}}, sweepDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, node := range src.nodes {
		l, err := ld.Load(ctx, src.request(node))
		if err != nil {
			t.Fatal(err)
		}
		if l.Node.Name != node || l.Objects != src.objects {
			t.Errorf("sweep node %s: read as %q, objects shared: %v", node, l.Node.Name, l.Objects == src.objects)
		}
	}
	if len(src.nodes) != 3 || len(src.failed) != 1 {
		t.Errorf("sweep nodes %v, failed %v", src.nodes, src.failed)
	}
}
