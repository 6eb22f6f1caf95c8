package collect

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The admission policies of deploy/ repeat, in CEL, what this package
// allows: the debug pod's shape and the commands it may run. The API server
// is their real test (e2e); these keep the two texts in step.

type policyDoc struct {
	Kind     string `json:"kind"`
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Data  map[string]string `json:"data"`
	Rules []struct {
		APIGroups []string `json:"apiGroups"`
		Resources []string `json:"resources"`
		Verbs     []string `json:"verbs"`
	} `json:"rules"`
	Spec struct {
		Validations []struct {
			Expression string `json:"expression"`
		} `json:"validations"`
		MatchConditions []struct {
			Name       string `json:"name"`
			Expression string `json:"expression"`
		} `json:"matchConditions"`
		ParamRef *struct {
			Name, Namespace string
		} `json:"paramRef"`
	} `json:"spec"`
}

func readDeploy(t *testing.T, file string) map[string]policyDoc {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "deploy", file))
	if err != nil {
		t.Fatal(err)
	}
	docs := map[string]policyDoc{}
	for _, part := range bytes.Split(data, []byte("\n---\n")) {
		var d policyDoc
		if err := yaml.Unmarshal(part, &d); err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		docs[d.Kind+"/"+d.Metadata.Name] = d
	}
	return docs
}

var celRaw = regexp.MustCompile(`matches\(r"([^"]*)"\)|matches\(r'([^']*)'\)`)

// execPatterns are the regular expressions of a policy's exec check.
func execPatterns(t *testing.T, d policyDoc) []*regexp.Regexp {
	t.Helper()
	seen := map[string]bool{}
	var out []*regexp.Regexp
	for _, v := range d.Spec.Validations {
		for _, m := range celRaw.FindAllStringSubmatch(v.Expression, -1) {
			p := m[1] + m[2]
			if seen[p] {
				continue
			}
			seen[p] = true
			out = append(out, regexp.MustCompile(p)) // CEL's matches is RE2, as Go's regexp
		}
	}
	if len(out) == 0 {
		t.Fatalf("policy %s checks no command", d.Metadata.Name)
	}
	return out
}

func quoted(argv []string) string {
	q := make([]string, len(argv))
	for i, a := range argv {
		q[i] = "'" + a + "'"
	}
	return strings.Join(q, " ")
}

// policyAccepts evaluates the exec check's shape in Go: one allowed
// command, or a script whose every line is a fixed line or matches.
func policyAccepts(res []*regexp.Regexp, argv []string) bool {
	matchesAny := func(s string) bool {
		return slices.ContainsFunc(res, func(r *regexp.Regexp) bool { return r.MatchString(s) })
	}
	if matchesAny(quoted(argv)) {
		return true
	}
	if len(argv) != 3 || argv[0] != "sh" || argv[1] != "-c" || !strings.HasPrefix(argv[2], "read -r n\nexec </dev/null\n") {
		return false
	}
	for _, l := range strings.Split(argv[2], "\n") {
		if l != "" && l != "read -r n" && l != "exec </dev/null" && l != `echo "` && !matchesAny(l) {
			return false
		}
	}
	return true
}

func TestPolicyAllowsExactlyTheReadCommands(t *testing.T) {
	exec := readDeploy(t, "policy.yaml")["ValidatingAdmissionPolicy/kubectl-proxyrules-read-only-exec"]
	viaKP := readDeploy(t, "via-kube-proxy/rbac.yaml")["ValidatingAdmissionPolicy/kubectl-proxyrules-via-kube-proxy"]
	res := execPatterns(t, exec)
	var a, b []string
	for _, r := range res {
		a = append(a, r.String())
	}
	for _, r := range execPatterns(t, viaKP) {
		b = append(b, r.String())
	}
	if !slices.Equal(a, b) {
		t.Errorf("the two policies check different commands:\n%q\n%q", a, b)
	}
	if !strings.Contains(exec.Spec.Validations[0].Expression, strings.ReplaceAll(scriptHeader, "\n", `\n`)) {
		t.Errorf("the policy does not check the script's header %q", scriptHeader)
	}

	// Everything the plugin sends: each command alone (an image without sh)
	// and the scripts of every plan.
	var all []NodeCommand
	for _, p := range []Probe{{}, {NFTKnown: true}, {ProxyMode: "iptables", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip nat", "ip filter", "ip6 nat", "ip6 filter", "ip mangle"}},
		{ProxyMode: "nftables", NFTKnown: true, NFTTables: []string{"ip kube-proxy", "ip6 kube-proxy"}},
		{ProxyMode: "ipvs", Backend: "nf_tables", NFTKnown: true, NFTTables: []string{"ip nat", "ip filter"}}} {
		for _, r := range Readers {
			all = append(all, FullPlan(p, r)...)
		}
	}
	all = append(all, FirstChains(kubeproxy.IPv6, []string{"KUBE-SVC-ABCDEFGHIJKLMNOP", "KUBE-SEP-ABCDEFGHIJKLMNOP", "KUBE-EXT-ABCDEFGHIJKLMNOP"})...)
	all = append(all, IPTablesVersion(), NFTVersion(), NFTKubeProxyTable(kubeproxy.IPv4), NFTKubeProxyTable(kubeproxy.IPv6))
	all = append(all, ipvsProbeCommands()...)
	// The conntrack reads: every filter shape (exact, prefixes, none).
	all = append(all, SysctlsCommand(), ConntrackStatsCommand(idStatsBefore), ConntrackStatsCommand(idStatsAfter),
		ConntrackTableCommand(ServiceConntrackFilter(manyServices(10))), ConntrackTableCommand(ServiceConntrackFilter(manyServices(2000))),
		ConntrackTableCommand(ServiceConntrackFilter(nil)))
	for i := 0; i < len(all); i++ {
		all = append(all, all[i].Fallback...)
	}
	for i := 0; i < 3000; i++ {
		all = append(all, ListChain(kubeproxy.IPv4, kubeproxy.BackendNFT, kubeproxy.TableNAT, "KUBE-SEP-"+strconv.Itoa(1000000000000000+i)))
	}
	for _, c := range all {
		if !policyAccepts(res, c.Argv) {
			t.Errorf("the policy refuses %q", c.Argv)
		}
	}
	for _, batch := range Batches(all) {
		argv, err := Script(batch)
		if err != nil {
			t.Fatal(err)
		}
		if !policyAccepts(res, argv) {
			t.Errorf("the policy refuses a script of %d commands", len(batch))
		}
	}
	good, _ := Script(all[:3])
	for _, evil := range append(slices.Clone(ipvsRefused), [][]string{
		{"iptables", "-F"}, {"iptables", "-t", "nat", "-F"}, {"nft", "flush", "ruleset"}, {"sh"}, {"sh", "-c", "iptables -F"},
		{"iptables-save", "-t", "raw"}, {"nft", "-f", "/tmp/x"}, {"iptables", "-t", "nat", "-S", "KUBE-X", "-F"},
		{"nft", "list", "tables"}, {"nft", "-j", "list", "ruleset"}, {"nft", "list", "ruleset"},
		{"sh", "-c", good[2] + "iptables -F\n"},
		{"sh", "-c", good[2] + "'iptables' '-F'\n"},
		{"sh", "-c", strings.Replace(good[2], `begin 0"`, `begin 0"; iptables -F; echo "`, 1)},
		{"sh", "-c", strings.Replace(good[2], "$n begin 0", "$(iptables -F) begin 0", 1)},
		{"sh", "-c", strings.Replace(good[2], "read -r n\n", "", 1)},
		{"sh", "-c", good[2] + "(ulimit -s unlimited 2>/dev/null; exec 'nft' 'flush' 'ruleset')\n"},
		// what grep, cat and wc could read besides the conntrack state
		{"grep", "-r", ".", "/etc"}, {"cat", "/etc/shadow"}, {"wc", "-l", "/etc/shadow"},
		{"grep", "-f", "/proc/net/nf_conntrack", "/etc/shadow"}, {"grep", "-H", ".", "/etc/shadow"},
		{"grep", "-H", ".", "/proc/sys/kernel/random/boot_id"},
		{"grep", "-F", "-m", "10", "-e", "x", "/etc/shadow"},
		{"grep", "-F", "-m", "10", "-e", "10.0.0.1", "/proc/net/nf_conntrack", "/etc/shadow"},
		{"grep", "-F", "-m", "10", "-e", "/etc/shadow", "/proc/net/nf_conntrack"},
		{"grep", "-F", "-m", "10", "-e", "-f/etc/shadow", "/proc/net/nf_conntrack"},
		{"grep", "-F", "-m", "10", "-f", "/etc/shadow", "/proc/net/nf_conntrack"},
		{"sh", "-c", good[2] + "'cat' '/proc/net/stat/nf_conntrack' '/etc/shadow'\n"},
		{"sh", "-c", good[2] + "'grep' '-F' '-m' '10' '-e' 'src=' '/proc/net/nf_conntrack' > /tmp/x\n"},
		// IPVS mode's reads, altered
		{"sh", "-c", good[2] + "'ipset' 'flush'\n"}, {"sh", "-c", good[2] + "'ipset' 'save' '-file' '/tmp/x'\n"},
		{"sh", "-c", good[2] + "'cat' '/proc/net/ip_vs_conn'\n"}, {"sh", "-c", good[2] + "'ipvsadm' '-C'\n"},
		{"sh", "-c", good[2] + "'ipset' 'save' > /tmp/x\n"},
		{"sh", "-c", good[2] + "'cat' '/proc/net/fib_trie' '/etc/shadow'\n"}, {"sh", "-c", good[2] + "'cat' '/proc/net/if_inet6' > /tmp/x\n"},
		{"sh", "-c", good[2] + "'cat' '/proc/net/fib_triestat'\n"}, {"sh", "-c", good[2] + "'cat' '/proc/net/if_inet6/../../../etc/shadow'\n"},
	}...) {
		if policyAccepts(res, evil) {
			t.Errorf("the policy accepts %q", evil)
		}
	}
}

func TestPolicyMatchesThePod(t *testing.T) {
	docs := readDeploy(t, "policy.yaml")
	params := docs["ConfigMap/"+PolicyParams]
	if params.Metadata.Namespace != DefaultDebugNamespace {
		t.Errorf("ConfigMap %s in namespace %q, want %s", PolicyParams, params.Metadata.Namespace, DefaultDebugNamespace)
	}
	if got := params.Data["maxDeadlineSeconds"]; got != strconv.Itoa(int(MaxPodDeadline.Seconds())) {
		t.Errorf("maxDeadlineSeconds %q, want the plugin's bound %v", got, MaxPodDeadline)
	}
	if !strings.Contains(params.Data["images"], "registry.k8s.io/kube-proxy\n") {
		t.Errorf("images %q lack kube-proxy's", params.Data["images"])
	}
	binding := docs["ValidatingAdmissionPolicyBinding/kubectl-proxyrules-debug-pod"]
	if binding.Spec.ParamRef == nil || binding.Spec.ParamRef.Name != PolicyParams || binding.Spec.ParamRef.Namespace != DefaultDebugNamespace {
		t.Errorf("binding's paramRef %+v", binding.Spec.ParamRef)
	}
	var all strings.Builder
	for _, v := range docs["ValidatingAdmissionPolicy/kubectl-proxyrules-debug-pod"].Spec.Validations {
		all.WriteString(v.Expression + "\n")
	}
	p := DebugPod(PodOptions{Node: "n", Namespace: DefaultDebugNamespace, Image: "i", StartedBy: "alice"})
	c := p.Spec.Containers[0]
	for _, want := range []string{
		"'" + LabelManagedBy + "'", "'" + ManagedBy + "'", "'" + AnnotationStartedBy + "'",
		"'" + c.Command[0] + "'", "'" + string(p.Spec.SecurityContext.SeccompProfile.Type) + "'",
		"'" + string(c.SecurityContext.Capabilities.Add[0]) + "'", "'" + string(c.SecurityContext.Capabilities.Add[1]) + "'",
	} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("the pod policy does not check %s", want)
		}
	}
	ns := readDeploy(t, "namespace.yaml")["Namespace/"+DefaultDebugNamespace]
	if ns.Metadata.Name != DefaultDebugNamespace {
		t.Errorf("deploy/namespace.yaml does not create %s", DefaultDebugNamespace)
	}
}

// quantityBound finds the bound the pod policy puts on one resource, as in
// quantity(variables.res.limits['cpu']).compareTo(quantity('1')) <= 0.
func quantityBound(t *testing.T, cel, kind string, name corev1.ResourceName) resource.Quantity {
	t.Helper()
	re := regexp.MustCompile(`quantity\(variables\.res\.` + kind + `\['` + string(name) + `'\]\)\.compareTo\(quantity\('([^']+)'\)\) <= 0`)
	m := re.FindStringSubmatch(cel)
	if m == nil {
		t.Fatalf("the pod policy bounds no %s %s", kind, name)
	}
	return resource.MustParse(m[1])
}

// The pod the plugin makes fits the scheduling bounds of the policy: its
// requests and limits, restart policy, grace period, pull policy and image
// pinning, no ports, no priority class.
func TestPolicyBoundsThePod(t *testing.T) {
	var all strings.Builder
	for _, v := range readDeploy(t, "policy.yaml")["ValidatingAdmissionPolicy/kubectl-proxyrules-debug-pod"].Spec.Validations {
		all.WriteString(v.Expression + "\n")
	}
	cel := all.String()
	p := DebugPod(PodOptions{Node: "n", Namespace: DefaultDebugNamespace, Image: "registry.k8s.io/kube-proxy:v1.37.2", StartedBy: "alice"})
	c := p.Spec.Containers[0]
	for kind, list := range map[string]corev1.ResourceList{"limits": c.Resources.Limits, "requests": c.Resources.Requests} {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			have, ok := list[name]
			if bound := quantityBound(t, cel, kind, name); !ok || have.Cmp(bound) > 0 {
				t.Errorf("the pod's %s %s %v is over the policy's %v", kind, name, have.String(), bound.String())
			}
		}
	}
	for _, want := range []string{
		"object.spec.restartPolicy == '" + string(p.Spec.RestartPolicy) + "'",
		"object.spec.terminationGracePeriodSeconds == " + strconv.FormatInt(*p.Spec.TerminationGracePeriodSeconds, 10),
		"'" + string(c.ImagePullPolicy) + "'",
		"!has(variables.c.ports)",
		"object.spec.priority < 2000000000",
	} {
		if !strings.Contains(cel, want) {
			t.Errorf("the pod policy does not check %s", want)
		}
	}
	if len(c.Ports) > 0 || p.Spec.PriorityClassName != "" || len(p.Finalizers) > 0 {
		t.Errorf("the pod has ports, a priority class or finalizers the policy refuses")
	}
}

// Each policy that restricts those a Role is bound to asks the authorizer
// for a marker rule that Role holds, and lets the exemption through.
func TestPolicyMarkersAreGranted(t *testing.T) {
	marker := regexp.MustCompile(`^authorizer\.group\('proxyrules\.kubectl\.io'\)\.resource\('([a-z-]+)'\)\.namespace\(request\.namespace\)\.check\('use'\)\.allowed\(\)$`)
	const exempt = "!authorizer.group('proxyrules.kubectl.io').resource('exemptions').check('bypass').allowed()"
	for _, tc := range []struct{ file, policy, role string }{
		{"policy.yaml", "kubectl-proxyrules-own-debug-pods", "rbac.yaml:Role/kubectl-proxyrules-debug-pod"},
		{"via-kube-proxy/rbac.yaml", "kubectl-proxyrules-via-kube-proxy", "via-kube-proxy/rbac.yaml:Role/kubectl-proxyrules-via-kube-proxy"},
		{"metrics/rbac.yaml", "kubectl-proxyrules-metrics", "metrics/rbac.yaml:Role/kubectl-proxyrules-metrics-via-kube-proxy"},
	} {
		conds := readDeploy(t, tc.file)["ValidatingAdmissionPolicy/"+tc.policy].Spec.MatchConditions
		if len(conds) != 2 || conds[1].Expression != exempt {
			t.Errorf("%s: matchConditions %+v, want the marker and the exemption", tc.policy, conds)
			continue
		}
		m := marker.FindStringSubmatch(conds[0].Expression)
		if m == nil {
			t.Errorf("%s: first condition %q is not a marker check", tc.policy, conds[0].Expression)
			continue
		}
		file, name, _ := strings.Cut(tc.role, ":")
		granted := false
		for _, r := range readDeploy(t, file)[name].Rules {
			granted = granted || slices.Equal(r.APIGroups, []string{"proxyrules.kubectl.io"}) && slices.Contains(r.Resources, m[1]) && slices.Equal(r.Verbs, []string{"use"})
		}
		if !granted {
			t.Errorf("%s asks for marker %q, which %s does not grant", tc.policy, m[1], tc.role)
		}
	}
	exemption := readDeploy(t, "rbac.yaml")["ClusterRole/kubectl-proxyrules-policy-exempt"].Rules
	if len(exemption) != 1 || !slices.Equal(exemption[0].Resources, []string{"exemptions"}) || !slices.Equal(exemption[0].Verbs, []string{"bypass"}) {
		t.Errorf("ClusterRole kubectl-proxyrules-policy-exempt grants %+v", exemption)
	}
}
