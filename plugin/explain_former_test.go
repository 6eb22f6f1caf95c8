package plugin

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// objectsWithout writes small-v1.37's objects without one Service and its
// slices: the Service was deleted, kube-proxy has not synced since.
func objectsWithout(t *testing.T, ns, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(fixture.Dir("small-v1.37"), "objects.json"))
	if err != nil {
		t.Fatal(err)
	}
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(data, &list); err != nil {
		t.Fatal(err)
	}
	kept := list.Items[:0]
	for _, it := range list.Items {
		var o struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace, Name string
				Labels          map[string]string
			} `json:"metadata"`
		}
		if err := json.Unmarshal(it, &o); err != nil {
			t.Fatal(err)
		}
		m := o.Metadata
		if m.Namespace == ns && (o.Kind == "Service" && m.Name == name || m.Labels["kubernetes.io/service-name"] == name) {
			continue
		}
		kept = append(kept, it)
	}
	list.Items = kept
	out, _ := json.Marshal(list)
	path := filepath.Join(t.TempDir(), "objects.json")
	if err := os.WriteFile(path, out, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// explain finds a deleted Service the rules still route by its name, its
// address or its chain, and shows the path its connections still take.
func TestExplainDeletedService(t *testing.T) {
	small := fixture.Dir("small-v1.37")
	objs := objectsWithout(t, "shop", "web")
	for _, dump := range []string{"iptables/save-nft-ipv4.txt", "nftables/ruleset.json"} {
		for _, ref := range []string{"svc/web", "web", "10.96.10.1", "10.96.10.1:80", "web.shop.svc.cluster.local"} {
			t.Run(dump+"/"+ref, func(t *testing.T) {
				out, errOut, err := runCmd(t, nil, "explain", ref, "-n", "shop", "--from-dump", filepath.Join(small, dump), "--from-objects", objs, "--node", "node-a", "-o", "json")
				if code := exitOf(t, err, errOut); code != ExitProblems {
					t.Fatalf("exit %d (%s), want %d", code, errOut, ExitProblems)
				}
				var rep diagnose.ServiceExplanation
				if err := json.Unmarshal([]byte(out), &rep); err != nil {
					t.Fatal(err)
				}
				if !rep.Deleted || rep.Name != "web" || len(rep.Ports) != 1 {
					t.Fatalf("report %+v, want the deleted shop/web", rep)
				}
				p := rep.Ports[0]
				if len(p.Problems) == 0 || p.Problems[0].Kind != diagnose.ProblemDeletedService {
					t.Errorf("problems %+v, want deletedService first", p.Problems)
				}
				gone := 0
				for _, e := range p.Endpoints {
					if e.InRules && !e.InSlices {
						gone++
					}
				}
				if gone != 3 {
					t.Errorf("%d endpoints that are gone on the path, want 3: %+v", gone, p.Endpoints)
				}
			})
		}
	}
	// By one of its chains, in the text a person reads.
	out, errOut, err := runCmd(t, nil, "explain", "KUBE-SVC-67NZLRHBNDSAWJRO", "--from-dump", filepath.Join(small, "iptables/save-nft-ipv4.txt"), "--from-objects", objs, "--node", "node-a")
	if code := exitOf(t, err, errOut); code != ExitProblems || !strings.Contains(out, "Service shop/web is not in the API objects (deleted)") {
		t.Errorf("explain KUBE-SVC-67NZLRHBNDSAWJRO: exit %d\n%s%s", code, out, errOut)
	}
}

// With --node (only the named Service's objects are read then), a typo
// still gets its did-you-mean, and a Service of another namespace its
// "add -n"; a name nothing routes stays "not found".
func TestExplainNotFoundWithNode(t *testing.T) {
	small := fixture.Dir("small-v1.37")
	in := []string{"--from-dump", filepath.Join(small, "iptables/save-nft-ipv4.txt"), "--from-objects", filepath.Join(small, "objects.json"), "--node", "node-a"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"svc/frontnd", "-n", "shop"}, "did you mean svc/frontend?"},
		{[]string{"svc/web", "-n", "kube-system"}, "it exists in namespace shop: add -n shop"},
		{[]string{"svc/nothing-like-it", "-n", "shop"}, "service shop/nothing-like-it not found"},
	} {
		_, errOut, err := runCmd(t, nil, append(append([]string{"explain"}, tc.args...), in...)...)
		if err == nil || !strings.Contains(err.Error()+errOut, tc.want) {
			t.Errorf("explain %v: %v %s, want %q", tc.args, err, errOut, tc.want)
		}
	}
}
