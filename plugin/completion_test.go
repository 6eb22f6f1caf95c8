package plugin

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

func fakeCluster() *fake.Clientset {
	objs := []runtime.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-public"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-1-7"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "ip-10-0-2-9"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "control-plane"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kubernetes"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "frontend"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "cart"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "checkout"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "kube-dns"}},
	}
	return fake.NewClientset(objs...)
}

func TestCompleteNamespaces(t *testing.T) {
	cs := fakeCluster()
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"default", "kube-public", "kube-system", "shop"}},
		{"kube-", []string{"kube-public", "kube-system"}},
		{"nope", []string{}},
	} {
		got, err := CompleteNamespaces(context.Background(), cs, tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("CompleteNamespaces(%q) (-want +got):\n%s", tc.prefix, diff)
		}
	}
}

func TestCompleteNodes(t *testing.T) {
	cs := fakeCluster()
	for _, tc := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"control-plane", "ip-10-0-1-7", "ip-10-0-2-9"}},
		{"ip-10-0-1", []string{"ip-10-0-1-7"}},
	} {
		got, err := CompleteNodes(context.Background(), cs, tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("CompleteNodes(%q) (-want +got):\n%s", tc.prefix, diff)
		}
	}
}

func TestCompleteServices(t *testing.T) {
	cs := fakeCluster()
	for _, tc := range []struct {
		ns, prefix string
		want       []string
	}{
		{"shop", "", []string{"svc/cart", "svc/checkout", "svc/frontend"}},
		{"shop", "svc/c", []string{"svc/cart", "svc/checkout"}},
		{"shop", "s", []string{"svc/cart", "svc/checkout", "svc/frontend"}},
		{"shop", "service/f", []string{"service/frontend"}},
		{"shop", "services/", []string{"services/cart", "services/checkout", "services/frontend"}},
		{"shop", "fr", []string{"frontend"}}, // a bare name is accepted too
		{"shop", "c", []string{"cart", "checkout"}},
		{"kube-system", "s", []string{"svc/kube-dns"}},
		{"default", "svc/", []string{"svc/kubernetes"}},
		{"empty", "", []string{}},
	} {
		got, err := CompleteServices(context.Background(), cs, tc.ns, tc.prefix)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("CompleteServices(%q, %q) (-want +got):\n%s", tc.ns, tc.prefix, diff)
		}
	}
}

func TestCompleteKubeconfig(t *testing.T) {
	cfg := clientcmdapi.NewConfig()
	cfg.Contexts["prod"] = &clientcmdapi.Context{}
	cfg.Contexts["staging"] = &clientcmdapi.Context{}
	cfg.Contexts["prod-eu"] = &clientcmdapi.Context{}
	cfg.Clusters["c1"] = &clientcmdapi.Cluster{}
	cfg.AuthInfos["admin"] = &clientcmdapi.AuthInfo{}
	if diff := cmp.Diff([]string{"prod", "prod-eu"}, CompleteKubeconfig(cfg, "context", "pr")); diff != "" {
		t.Errorf("contexts (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"c1"}, CompleteKubeconfig(cfg, "cluster", "")); diff != "" {
		t.Errorf("clusters (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"admin"}, CompleteKubeconfig(cfg, "user", "a")); diff != "" {
		t.Errorf("users (-want +got):\n%s", diff)
	}
}

// The cobra glue: cluster errors give no candidates and no file names.
func TestClusterCompletionFuncs(t *testing.T) {
	ok := Cluster(func() (kubernetes.Interface, string, error) { return fakeCluster(), "shop", nil })
	broken := Cluster(func() (kubernetes.Interface, string, error) { return nil, "", errors.New("no kubeconfig") })
	cmd := &cobra.Command{}

	got, dir := ServiceArgCompletion(ok)(cmd, nil, "svc/f")
	if diff := cmp.Diff([]cobra.Completion{"svc/frontend"}, got); diff != "" || dir != cobra.ShellCompDirectiveNoFileComp {
		t.Errorf("ServiceArgCompletion: %v %v (-want +got):\n%s", got, dir, diff)
	}
	if got, _ := ServiceArgCompletion(ok)(cmd, []string{"svc/cart"}, ""); len(got) != 0 {
		t.Errorf("ServiceArgCompletion completes a second argument: %v", got)
	}
	got, _ = NodeCompletion(ok)(cmd, nil, "ip-")
	if diff := cmp.Diff([]cobra.Completion{"ip-10-0-1-7", "ip-10-0-2-9"}, got); diff != "" {
		t.Errorf("NodeCompletion (-want +got):\n%s", diff)
	}
	got, _ = NamespaceCompletion(ok)(cmd, nil, "sh")
	if diff := cmp.Diff([]cobra.Completion{"shop"}, got); diff != "" {
		t.Errorf("NamespaceCompletion (-want +got):\n%s", diff)
	}
	for name, f := range map[string]cobra.CompletionFunc{
		"svc": ServiceArgCompletion(broken), "node": NodeCompletion(broken), "namespace": NamespaceCompletion(broken),
	} {
		if got, dir := f(cmd, nil, ""); len(got) != 0 || dir != cobra.ShellCompDirectiveNoFileComp {
			t.Errorf("%s with a broken cluster: %v %v", name, got, dir)
		}
	}
}

const testKubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c1
  cluster: {server: "https://127.0.0.1:1"}
contexts:
- name: prod
  context: {cluster: c1, user: admin, namespace: shop}
- name: staging
  context: {cluster: c1, user: admin}
users:
- name: admin
  user: {token: x}
current-context: prod
`

// The whole chain through the real command tree: `__complete` is what
// cobra's shell scripts and kubectl_complete-proxyrules call.
func TestCompleteThroughCommandTree(t *testing.T) {
	kubeconfig := filepath.Join(t.TempDir(), "config")
	if err := os.WriteFile(kubeconfig, []byte(testKubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args   []string
		want   []string // lines before the :directive line
		subset bool     // want is a subset: commands are added over time
	}{
		{[]string{"__complete", ""}, []string{"completion", "help", "map", "version"}, true},
		{[]string{"__complete", "ma"}, []string{"map"}, true},
		{[]string{"__complete", "--kubeconfig", kubeconfig, "--context", ""}, []string{"prod", "staging"}, false},
		{[]string{"__complete", "--kubeconfig", kubeconfig, "--user", ""}, []string{"admin"}, false},
		{[]string{"__complete", "version", "-o", ""}, []string{"text", "wide", "json", "yaml"}, false},
		// An unreachable API server: no candidates, no file names, no hang.
		{[]string{"__complete", "--kubeconfig", kubeconfig, "--request-timeout", "2s", "map", "--node", ""}, nil, false},
		{[]string{"__complete", "--kubeconfig", kubeconfig, "--request-timeout", "2s", "-n", ""}, nil, false},
	} {
		out, _, err := runCmd(t, nil, tc.args...)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		directive := lines[len(lines)-1]
		var names []string
		for _, l := range lines[:len(lines)-1] {
			if strings.HasPrefix(l, "Completion ended with directive") {
				continue
			}
			names = append(names, strings.SplitN(l, "\t", 2)[0])
		}
		if tc.subset {
			have := map[string]bool{}
			for _, n := range names {
				have[n] = true
			}
			for _, w := range tc.want {
				if !have[w] {
					t.Errorf("%v does not offer %q:\n%s", tc.args, w, out)
				}
			}
		} else if diff := cmp.Diff(tc.want, names); diff != "" {
			t.Errorf("%v (-want +got):\n%s\nfull output:\n%s", tc.args, diff, out)
		}
		if !strings.HasPrefix(directive, ":") {
			t.Errorf("%v: no directive line in %q", tc.args, out)
		}
	}
	// The --node and -n completion functions are registered.
	root := NewCmdRoot(testStreams())
	mapCmd, _, err := root.Find([]string{"map"})
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range []string{"node", "namespace", "context", "cluster", "user"} {
		if _, ok := mapCmd.GetFlagCompletionFunc(flag); !ok {
			t.Errorf("map --%s has no completion function", flag)
		}
	}
}

// A name that would need escaping is no candidate: a newline would make
// it two, a tab a description, an escape sequence act on the terminal.
func TestCompletionDropsNamesNeedingEscape(t *testing.T) {
	cs := fake.NewClientset(
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-a"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-b\nnode-c"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-d\tdescription"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-\x1b[31me"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node f"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-\u202eg"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-\xffh"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns\r"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web\x07"}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}},
	)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		list func() ([]string, error)
		want []string
	}{
		{"nodes", func() ([]string, error) { return CompleteNodes(ctx, cs, "node") }, []string{"node-a"}},
		{"namespaces", func() ([]string, error) { return CompleteNamespaces(ctx, cs, "") }, []string{}},
		{"services", func() ([]string, error) { return CompleteServices(ctx, cs, "default", "svc/") }, []string{"svc/web"}},
		{"kubeconfig", func() ([]string, error) {
			cfg := clientcmdapi.NewConfig()
			cfg.Contexts["prod"] = clientcmdapi.NewContext()
			cfg.Contexts["prod\nstaging"] = clientcmdapi.NewContext()
			return CompleteKubeconfig(cfg, "context", ""), nil
		}, []string{"prod"}},
	} {
		got, err := tc.list()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
