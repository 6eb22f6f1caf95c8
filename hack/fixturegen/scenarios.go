package main

// Scenario definitions: the Services and EndpointSlices fed to kube-proxy's real
// proxier code. Everything here is plain k8s.io/api and builds against every
// kube-proxy version this generator supports.

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"sort"
	"strings"
	"time"

	v1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// Cluster layout shared by every scenario.
const (
	nodeName      = "node-a"
	nodeIPv4      = "10.0.0.10"
	nodeIPv6      = "fd00::10"
	podCIDRv4     = "10.244.0.0/24"
	podCIDRv6     = "fd00:10:244::/64"
	clusterCIDRv4 = "10.244.0.0/16"
	clusterCIDRv6 = "fd00:10:244::/56"
	svcCIDRv4     = "10.96.0.0/16"
	svcCIDRv6     = "fd00:10:96::/112"
)

// Other nodes of the imaginary cluster (only used as EndpointSlice nodeName).
var nodes = map[string]struct{ v4, v6 string }{
	"node-a": {"10.0.0.10", "fd00::10"},
	"node-b": {"10.0.0.11", "fd00::11"},
	"node-c": {"10.0.0.12", "fd00::12"},
}

// fixedTime is used for every timestamp so that objects.json is deterministic.
var fixedTime = metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

// Scenario is one fixture directory.
type Scenario struct {
	Name        string
	Description string
	// MasqueradeBit is kube-proxy's masqueradeBit (default 14).
	MasqueradeBit int
	// Modes lists the proxy modes to generate ("iptables", "nftables").
	Modes []string
	// Versions lists the generator builds that produce this scenario ("v1.37", "v1.34").
	Version string
	// Services / slices present at start.
	Objects func() *ObjectSet
	// Churn, if set, is applied after the first sync; a second sync follows.
	Churn func(before *ObjectSet) *ObjectSet
	// ExtraSyncs: syncs run after the churn's sync, with no further changes
	// (e.g. the full sync kube-proxy forces after a failed one).
	ExtraSyncs int

	// IPTablesSeed, if set, returns iptables-restore input (per family; ""
	// for none) for rules other components left on the node before
	// kube-proxy starts. It is loaded into the fake iptables with --noflush
	// semantics, so kube-proxy runs next to it and every dump shows it.
	IPTablesSeed func(family v1.IPFamily) string
	// NFTForeign, if set, is loaded with `nft -f` into the nftables-mode
	// namespace after kube-proxy's syncs.
	NFTForeign string
	// ForeignMarkRules / LeftoverChains are recorded in meta.json.
	ForeignMarkRules []ForeignMarkRule
	LeftoverChains   []LeftoverChain
	// LegacyBackend names the (v1.34) scenario whose iptables restore files
	// hack/gen-fixtures.sh loads with iptables-legacy-restore into the same
	// namespace as this scenario's iptables-nft state.
	LegacyBackend string
	// VerifyFailures: hack/gen-fixtures.sh applies kube-proxy's failed
	// restore input with the real tools and keeps their answer.
	VerifyFailures bool
	// NodeLabels, if set, are given to the proxiers before the first sync
	// (OnTopologyChange, as kube-proxy's node informer does), and written
	// with the other nodes' as nodes.json.
	NodeLabels map[string]string
}

// flags are the extra steps hack/gen-fixtures.sh runs for a scenario,
// printed by `fixturegen list` as a third column.
func (s *Scenario) flags() string {
	var f []string
	if s.LegacyBackend != "" {
		f = append(f, "legacy-backend="+s.LegacyBackend)
	}
	if s.VerifyFailures {
		f = append(f, "verify-failed-restore")
	}
	if len(f) == 0 {
		return "-"
	}
	return strings.Join(f, ",")
}

// ObjectSet is the API state at one point in time.
type ObjectSet struct {
	Services []*v1.Service
	Slices   []*discovery.EndpointSlice
}

func (o *ObjectSet) add(svc *v1.Service, slices ...*discovery.EndpointSlice) {
	o.Services = append(o.Services, svc)
	o.Slices = append(o.Slices, slices...)
}

func (o *ObjectSet) clone() *ObjectSet {
	n := &ObjectSet{}
	for _, s := range o.Services {
		n.Services = append(n.Services, s.DeepCopy())
	}
	for _, s := range o.Slices {
		n.Slices = append(n.Slices, s.DeepCopy())
	}
	return n
}

func (o *ObjectSet) sort() {
	sort.SliceStable(o.Services, func(i, j int) bool {
		a, b := o.Services[i], o.Services[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
	sort.SliceStable(o.Slices, func(i, j int) bool {
		a, b := o.Slices[i], o.Slices[j]
		if a.Namespace != b.Namespace {
			return a.Namespace < b.Namespace
		}
		return a.Name < b.Name
	})
}

// ---------------------------------------------------------------------------
// Object builders

type ep struct {
	ip          string
	node        string // "" = no nodeName (e.g. apiserver endpoints)
	pod         string // pod name; "" = no targetRef
	ready       bool
	serving     bool
	terminating bool
	// zoneHints / nodeHints: hints.forZones / hints.forNodes, as the
	// EndpointSlice controller writes them for trafficDistribution.
	zoneHints, nodeHints []string
}

// readyEP is a normal running endpoint.
func readyEP(ip, node, pod string) ep {
	return ep{ip: ip, node: node, pod: pod, ready: true, serving: true}
}

// termEP is a terminating endpoint that is still serving.
func termEP(ip, node, pod string) ep {
	return ep{ip: ip, node: node, pod: pod, ready: false, serving: true, terminating: true}
}

type port struct {
	name     string
	port     int32
	target   int32
	proto    v1.Protocol
	nodePort int32
}

type svcSpec struct {
	ns, name     string
	typ          v1.ServiceType
	clusterIPs   []string // "None" for headless
	ports        []port
	externalIPs  []string
	lbIPs        []string
	sourceRanges []string
	etpLocal     bool
	itpLocal     bool
	hcNodePort   int32
	affinity     bool
	externalName string
	selector     map[string]string
	labels       map[string]string
	// endpoints per address family; slices are only written for families listed
	v4, v6 []ep
	// emptySlice: the service has a selector but no ready pods: the
	// endpointslice controller writes a placeholder slice with no endpoints.
	emptySlice bool
	// noSlices: no EndpointSlice at all (no selector, e.g. ExternalName)
	noSlices bool
	// apiserver: the slice is written by the apiserver's endpoint reconciler
	// (default/kubernetes): no selector, no owner, only the service-name label,
	// only the ready condition.
	apiserver bool
	// trafficDistribution: spec.trafficDistribution (PreferSameZone,
	// PreferClose, PreferSameNode); the hints are the endpoints' own.
	trafficDistribution string
}

// shortHash gives deterministic pseudo-random suffixes for generated names.
func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	enc := strings.ToLower(base32.StdEncoding.EncodeToString(sum[:]))
	// kubernetes' rand.String alphabet has no vowels or confusable chars;
	// use a similar one.
	const alphabet = "bcdfghjklmnpqrstvwxz2456789"
	out := make([]byte, n)
	for i := 0; i < n; i++ {
		out[i] = alphabet[int(enc[i])%len(alphabet)]
	}
	return string(out)
}

func uid(kind, ns, name string) types.UID {
	sum := sha256.Sum256([]byte(kind + "/" + ns + "/" + name))
	h := fmt.Sprintf("%x", sum[:16])
	return types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32])
}

var resourceVersion = 1000

func nextRV() string {
	resourceVersion++
	return fmt.Sprint(resourceVersion)
}

func isIPv6(ip string) bool { return strings.Contains(ip, ":") }

// build makes the Service and the EndpointSlices the controllers would
// write for it.
func (s svcSpec) build() (*v1.Service, []*discovery.EndpointSlice) {
	svc := s.service()
	if s.noSlices || s.typ == v1.ServiceTypeExternalName {
		return svc, nil
	}
	return svc, s.slices(svc)
}

// service makes the Service object.
func (s svcSpec) service() *v1.Service {
	svc := &v1.Service{
		TypeMeta: metav1.TypeMeta{Kind: "Service", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              s.name,
			Namespace:         s.ns,
			UID:               uid("Service", s.ns, s.name),
			ResourceVersion:   nextRV(),
			CreationTimestamp: fixedTime,
			Labels:            s.labels,
		},
		Spec: v1.ServiceSpec{
			Type:     s.typ,
			Selector: s.selector,
		},
	}
	if s.typ == "" {
		svc.Spec.Type = v1.ServiceTypeClusterIP
	}
	if s.selector == nil && !s.noSlices && !s.apiserver && s.typ != v1.ServiceTypeExternalName {
		svc.Spec.Selector = map[string]string{"app": s.name}
	}
	if s.typ == v1.ServiceTypeExternalName {
		svc.Spec.ExternalName = s.externalName
		svc.Spec.SessionAffinity = v1.ServiceAffinityNone
	} else {
		s.clusterIPSpec(&svc.Spec)
	}
	s.portSpec(&svc.Spec)
	svc.Spec.ExternalIPs = s.externalIPs
	if s.trafficDistribution != "" {
		svc.Spec.TrafficDistribution = ptrTo(s.trafficDistribution)
	}
	s.externalSpec(svc)
	return svc
}

// clusterIPSpec fills what a Service with cluster IPs has: its families,
// internal traffic policy and session affinity.
func (s svcSpec) clusterIPSpec(spec *v1.ServiceSpec) {
	spec.ClusterIP = s.clusterIPs[0]
	spec.ClusterIPs = s.clusterIPs
	var fams []v1.IPFamily
	if s.clusterIPs[0] == v1.ClusterIPNone {
		fams = []v1.IPFamily{v1.IPv4Protocol}
	} else {
		for _, ip := range s.clusterIPs {
			if isIPv6(ip) {
				fams = append(fams, v1.IPv6Protocol)
			} else {
				fams = append(fams, v1.IPv4Protocol)
			}
		}
	}
	spec.IPFamilies = fams
	pol := v1.IPFamilyPolicySingleStack
	if len(fams) > 1 {
		pol = v1.IPFamilyPolicyRequireDualStack
	}
	spec.IPFamilyPolicy = &pol
	itp := v1.ServiceInternalTrafficPolicyCluster
	if s.itpLocal {
		itp = v1.ServiceInternalTrafficPolicyLocal
	}
	spec.InternalTrafficPolicy = &itp
	spec.SessionAffinity = v1.ServiceAffinityNone
	if s.affinity {
		spec.SessionAffinity = v1.ServiceAffinityClientIP
		spec.SessionAffinityConfig = &v1.SessionAffinityConfig{ClientIP: &v1.ClientIPConfig{TimeoutSeconds: ptrTo(int32(10800))}}
	}
}

// portSpec fills the ports, TCP and port = targetPort unless said.
func (s svcSpec) portSpec(spec *v1.ServiceSpec) {
	for _, p := range s.ports {
		proto := p.proto
		if proto == "" {
			proto = v1.ProtocolTCP
		}
		target := p.target
		if target == 0 {
			target = p.port
		}
		spec.Ports = append(spec.Ports, v1.ServicePort{
			Name:       p.name,
			Protocol:   proto,
			Port:       p.port,
			TargetPort: intstr.FromInt32(target),
			NodePort:   p.nodePort,
		})
	}
}

// externalSpec fills the external traffic policy and a LoadBalancer's
// source ranges and status.
func (s svcSpec) externalSpec(svc *v1.Service) {
	if s.typ == v1.ServiceTypeNodePort || s.typ == v1.ServiceTypeLoadBalancer {
		etp := v1.ServiceExternalTrafficPolicyCluster
		if s.etpLocal {
			etp = v1.ServiceExternalTrafficPolicyLocal
			svc.Spec.HealthCheckNodePort = s.hcNodePort
		}
		svc.Spec.ExternalTrafficPolicy = etp
	} else if len(s.externalIPs) > 0 {
		svc.Spec.ExternalTrafficPolicy = v1.ServiceExternalTrafficPolicyCluster
	}
	if s.typ == v1.ServiceTypeLoadBalancer {
		svc.Spec.AllocateLoadBalancerNodePorts = ptrTo(true)
		svc.Spec.LoadBalancerSourceRanges = s.sourceRanges
		for _, ip := range s.lbIPs {
			svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, v1.LoadBalancerIngress{
				IP:     ip,
				IPMode: ptrTo(v1.LoadBalancerIPModeVIP),
			})
		}
	}
}

// slices makes one EndpointSlice per family of the Service, IPv4 first.
func (s svcSpec) slices(svc *v1.Service) []*discovery.EndpointSlice {
	var slices []*discovery.EndpointSlice
	hasV4, hasV6 := false, false
	for _, f := range svc.Spec.IPFamilies {
		hasV4 = hasV4 || f == v1.IPv4Protocol
		hasV6 = hasV6 || f == v1.IPv6Protocol
	}
	if hasV4 {
		slices = append(slices, s.slice(svc, discovery.AddressTypeIPv4, s.v4, s.sliceName("v4")))
	}
	if hasV6 {
		slices = append(slices, s.slice(svc, discovery.AddressTypeIPv6, s.v6, s.sliceName("v6")))
	}
	return slices
}

// sliceName is the controller's generated name, or the apiserver's.
func (s svcSpec) sliceName(fam string) string {
	if s.apiserver {
		return s.name // default/kubernetes
	}
	return s.name + "-" + shortHash(s.ns+"/"+s.name+"/"+fam, 5)
}

// slice makes the EndpointSlice of one family, as the EndpointSlice
// controller (or, for default/kubernetes, the apiserver) writes it.
func (s svcSpec) slice(svc *v1.Service, fam discovery.AddressType, eps []ep, name string) *discovery.EndpointSlice {
	labels := map[string]string{
		discovery.LabelServiceName: s.name,
		discovery.LabelManagedBy:   "endpointslice-controller.k8s.io",
	}
	if s.apiserver {
		delete(labels, discovery.LabelManagedBy)
	}
	if svc.Spec.ClusterIP == v1.ClusterIPNone {
		labels[v1.IsHeadlessService] = ""
	}
	sl := &discovery.EndpointSlice{
		TypeMeta: metav1.TypeMeta{Kind: "EndpointSlice", APIVersion: "discovery.k8s.io/v1"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         s.ns,
			UID:               uid("EndpointSlice", s.ns, name),
			ResourceVersion:   nextRV(),
			CreationTimestamp: fixedTime,
			Labels:            labels,
			Annotations: map[string]string{
				"endpoints.kubernetes.io/last-change-trigger-time": fixedTime.UTC().Format(time.RFC3339),
			},
		},
		AddressType: fam,
	}
	if !s.apiserver {
		sl.GenerateName = s.name + "-"
		sl.OwnerReferences = []metav1.OwnerReference{{
			APIVersion:         "v1",
			Kind:               "Service",
			Name:               s.name,
			UID:                svc.UID,
			Controller:         ptrTo(true),
			BlockOwnerDeletion: ptrTo(true),
		}}
	} else {
		delete(sl.Annotations, "endpoints.kubernetes.io/last-change-trigger-time")
	}
	if s.emptySlice {
		// The controller's placeholder slice: no endpoints, no ports.
		return sl
	}
	for _, p := range svc.Spec.Ports {
		sl.Ports = append(sl.Ports, discovery.EndpointPort{
			Name:     ptrTo(p.Name),
			Port:     ptrTo(p.TargetPort.IntVal),
			Protocol: ptrTo(p.Protocol),
		})
	}
	for _, e := range eps {
		sl.Endpoints = append(sl.Endpoints, s.endpoint(e))
	}
	return sl
}

// endpoint is one endpoint of a slice, with its zone, hints and pod.
func (s svcSpec) endpoint(e ep) discovery.Endpoint {
	d := discovery.Endpoint{
		Addresses: []string{e.ip},
		Conditions: discovery.EndpointConditions{
			Ready:       ptrTo(e.ready),
			Serving:     ptrTo(e.serving),
			Terminating: ptrTo(e.terminating),
		},
	}
	if s.apiserver {
		d.Conditions = discovery.EndpointConditions{Ready: ptrTo(e.ready)}
	}
	if e.node != "" {
		d.NodeName = ptrTo(e.node)
		d.Zone = ptrTo("zone-" + strings.TrimPrefix(e.node, "node-"))
	}
	if len(e.zoneHints) > 0 || len(e.nodeHints) > 0 {
		d.Hints = &discovery.EndpointHints{}
		for _, z := range e.zoneHints {
			d.Hints.ForZones = append(d.Hints.ForZones, discovery.ForZone{Name: z})
		}
		for _, n := range e.nodeHints {
			d.Hints.ForNodes = append(d.Hints.ForNodes, discovery.ForNode{Name: n})
		}
	}
	if e.pod != "" {
		d.TargetRef = &v1.ObjectReference{
			Kind:      "Pod",
			Namespace: s.ns,
			Name:      e.pod,
			UID:       uid("Pod", s.ns, e.pod),
		}
	}
	return d
}

func ptrTo[T any](v T) *T { return &v }

// podName gives a Deployment-style pod name.
func podName(app string, i int) string {
	return app + "-" + shortHash(app, 10) + "-" + shortHash(fmt.Sprintf("%s/%d", app, i), 5)
}

// ---------------------------------------------------------------------------
// The small object set: every service type and traffic policy.

// smallSpecs is the small object set, group by group; the order is the
// objects' resourceVersion order and must not change.
func smallSpecs() []svcSpec {
	var specs []svcSpec
	for _, group := range [][]svcSpec{
		clusterAddonSpecs(), serviceTypeSpecs(), trafficPolicySpecs(),
		portSpecs(), endpointCaseSpecs(), familySpecs(),
	} {
		specs = append(specs, group...)
	}
	return specs
}

// clusterAddonSpecs are the Services every cluster has: the apiserver's and DNS.
func clusterAddonSpecs() []svcSpec {
	return []svcSpec{
		{
			// As the apiserver maintains it: no selector, endpoints without
			// nodeName/targetRef, managed by the apiserver itself.
			ns: "default", name: "kubernetes",
			clusterIPs: []string{"10.96.0.1"},
			ports:      []port{{name: "https", port: 443, target: 6443}},
			labels:     map[string]string{"component": "apiserver", "provider": "kubernetes"},
			apiserver:  true,
			v4: []ep{
				readyEP("10.0.0.2", "", ""),
			},
		},
		{
			ns: "kube-system", name: "kube-dns",
			clusterIPs: []string{"10.96.0.10"},
			ports: []port{
				{name: "dns", port: 53, proto: v1.ProtocolUDP},
				{name: "dns-tcp", port: 53, proto: v1.ProtocolTCP},
				{name: "metrics", port: 9153, proto: v1.ProtocolTCP},
			},
			selector: map[string]string{"k8s-app": "kube-dns"},
			labels:   map[string]string{"k8s-app": "kube-dns", "kubernetes.io/cluster-service": "true", "kubernetes.io/name": "CoreDNS"},
			v4: []ep{
				readyEP("10.244.0.2", "node-a", podName("coredns", 0)),
				readyEP("10.244.1.2", "node-b", podName("coredns", 1)),
			},
		},
	}
}

// serviceTypeSpecs are one Service of each type kube-proxy programs:
// ClusterIP, NodePort, LoadBalancer, and externalIPs.
func serviceTypeSpecs() []svcSpec {
	return []svcSpec{
		{
			// Plain ClusterIP, named port, endpoints on node-a and other nodes.
			ns: "shop", name: "web",
			clusterIPs: []string{"10.96.10.1"},
			ports:      []port{{name: "http", port: 80, target: 8080}},
			v4: []ep{
				readyEP("10.244.0.11", "node-a", podName("web", 0)),
				readyEP("10.244.1.11", "node-b", podName("web", 1)),
				readyEP("10.244.2.11", "node-c", podName("web", 2)),
			},
		},
		{
			// NodePort, externalTrafficPolicy Cluster.
			ns: "shop", name: "api",
			typ:        v1.ServiceTypeNodePort,
			clusterIPs: []string{"10.96.10.2"},
			ports:      []port{{name: "http", port: 80, target: 8080, nodePort: 30080}},
			v4: []ep{
				readyEP("10.244.1.21", "node-b", podName("api", 0)),
				readyEP("10.244.2.21", "node-c", podName("api", 1)),
			},
		},
		{
			// LoadBalancer with status IP and loadBalancerSourceRanges.
			ns: "shop", name: "frontend",
			typ:          v1.ServiceTypeLoadBalancer,
			clusterIPs:   []string{"10.96.10.3"},
			ports:        []port{{name: "https", port: 443, target: 8443, nodePort: 30443}},
			lbIPs:        []string{"198.51.100.10"},
			sourceRanges: []string{"203.0.113.0/25", "10.0.0.0/8"},
			v4: []ep{
				readyEP("10.244.0.31", "node-a", podName("frontend", 0)),
				readyEP("10.244.1.31", "node-b", podName("frontend", 1)),
			},
		},
		{
			// ClusterIP with externalIPs.
			ns: "shop", name: "legacy-gw",
			clusterIPs:  []string{"10.96.10.4"},
			ports:       []port{{name: "http", port: 8080}},
			externalIPs: []string{"203.0.113.50"},
			v4: []ep{
				readyEP("10.244.2.41", "node-c", podName("legacy-gw", 0)),
			},
		},
	}
}

// trafficPolicySpecs cover the traffic policies and session affinity.
func trafficPolicySpecs() []svcSpec {
	return []svcSpec{
		{
			// LoadBalancer, externalTrafficPolicy Local, local and non-local endpoints.
			ns: "shop", name: "ingress",
			typ:        v1.ServiceTypeLoadBalancer,
			clusterIPs: []string{"10.96.10.5"},
			ports: []port{
				{name: "http", port: 80, target: 8080, nodePort: 31080},
				{name: "https", port: 443, target: 8443, nodePort: 31443},
			},
			lbIPs:      []string{"198.51.100.11"},
			etpLocal:   true,
			hcNodePort: 32001,
			v4: []ep{
				readyEP("10.244.0.51", "node-a", podName("ingress", 0)),
				readyEP("10.244.1.51", "node-b", podName("ingress", 1)),
			},
		},
		{
			// NodePort, externalTrafficPolicy Local, only non-local endpoints.
			ns: "shop", name: "reports",
			typ:        v1.ServiceTypeNodePort,
			clusterIPs: []string{"10.96.10.6"},
			ports:      []port{{name: "http", port: 80, target: 8080, nodePort: 31081}},
			etpLocal:   true,
			hcNodePort: 32002,
			v4: []ep{
				readyEP("10.244.1.61", "node-b", podName("reports", 0)),
			},
		},
		{
			// internalTrafficPolicy Local.
			ns: "monitoring", name: "node-agent",
			clusterIPs: []string{"10.96.20.1"},
			ports:      []port{{name: "metrics", port: 9100}},
			itpLocal:   true,
			v4: []ep{
				readyEP("10.244.0.71", "node-a", podName("node-agent", 0)),
				readyEP("10.244.1.71", "node-b", podName("node-agent", 1)),
				readyEP("10.244.2.71", "node-c", podName("node-agent", 2)),
			},
		},
		{
			// sessionAffinity ClientIP.
			ns: "shop", name: "cart",
			clusterIPs: []string{"10.96.10.7"},
			ports:      []port{{name: "http", port: 80, target: 8080}},
			affinity:   true,
			v4: []ep{
				readyEP("10.244.0.81", "node-a", podName("cart", 0)),
				readyEP("10.244.2.81", "node-c", podName("cart", 1)),
			},
		},
	}
}

// portSpecs cover port shapes: unnamed, several protocols, SCTP.
func portSpecs() []svcSpec {
	return []svcSpec{
		{
			// A single unnamed port.
			ns: "shop", name: "unnamed",
			clusterIPs: []string{"10.96.10.8"},
			ports:      []port{{name: "", port: 8080, target: 80}},
			v4: []ep{
				readyEP("10.244.0.91", "node-a", podName("unnamed", 0)),
				readyEP("10.244.1.91", "node-b", podName("unnamed", 1)),
			},
		},
		{
			// Multi-port: TCP + UDP with names.
			ns: "infra", name: "logs",
			clusterIPs: []string{"10.96.30.1"},
			ports: []port{
				{name: "http", port: 80, target: 8080, proto: v1.ProtocolTCP},
				{name: "syslog", port: 514, target: 5514, proto: v1.ProtocolUDP},
			},
			v4: []ep{
				readyEP("10.244.0.101", "node-a", podName("logs", 0)),
				readyEP("10.244.2.101", "node-c", podName("logs", 1)),
			},
		},
		{
			// SCTP port.
			ns: "telco", name: "diameter",
			clusterIPs: []string{"10.96.40.1"},
			ports:      []port{{name: "diameter", port: 3868, proto: v1.ProtocolSCTP}},
			v4: []ep{
				readyEP("10.244.1.111", "node-b", podName("diameter", 0)),
			},
		},
	}
}

// endpointCaseSpecs cover what kube-proxy skips (headless, ExternalName)
// and endpoints that are missing or terminating.
func endpointCaseSpecs() []svcSpec {
	return []svcSpec{
		{
			// Headless: kube-proxy ignores it.
			ns: "db", name: "postgres-headless",
			clusterIPs: []string{v1.ClusterIPNone},
			ports:      []port{{name: "postgres", port: 5432}},
			selector:   map[string]string{"app": "postgres"},
			v4: []ep{
				readyEP("10.244.0.121", "node-a", "postgres-0"),
				readyEP("10.244.1.121", "node-b", "postgres-1"),
			},
		},
		{
			// ExternalName: kube-proxy ignores it.
			ns: "db", name: "external-db",
			typ:          v1.ServiceTypeExternalName,
			externalName: "db.example.com",
			ports:        []port{{name: "postgres", port: 5432}},
			noSlices:     true,
		},
		{
			// Selector matches no ready pods: placeholder slice.
			ns: "shop", name: "empty",
			clusterIPs: []string{"10.96.10.9"},
			ports:      []port{{name: "http", port: 80, target: 8080}},
			emptySlice: true,
		},
		{
			// Only terminating (still serving) endpoints.
			ns: "shop", name: "draining",
			clusterIPs: []string{"10.96.10.10"},
			ports:      []port{{name: "http", port: 80, target: 8080}},
			v4: []ep{
				termEP("10.244.0.131", "node-a", podName("draining", 0)),
				termEP("10.244.1.131", "node-b", podName("draining", 1)),
			},
		},
	}
}

// familySpecs are dual-stack and IPv6-only Services.
func familySpecs() []svcSpec {
	return []svcSpec{
		{
			// Dual-stack NodePort with IPv6 endpoints.
			ns: "shop", name: "dual",
			typ:        v1.ServiceTypeNodePort,
			clusterIPs: []string{"10.96.10.11", "fd00:10:96::b"},
			ports:      []port{{name: "http", port: 80, target: 8080, nodePort: 30081}},
			v4: []ep{
				readyEP("10.244.0.141", "node-a", podName("dual", 0)),
				readyEP("10.244.1.141", "node-b", podName("dual", 1)),
			},
			v6: []ep{
				readyEP("fd00:10:244::141", "node-a", podName("dual", 0)),
				readyEP("fd00:10:244:1::141", "node-b", podName("dual", 1)),
			},
		},
		{
			// IPv6-only service.
			ns: "shop", name: "v6-only",
			clusterIPs: []string{"fd00:10:96::c"},
			ports:      []port{{name: "grpc", port: 9090}},
			v6: []ep{
				readyEP("fd00:10:244::151", "node-a", podName("v6-only", 0)),
				readyEP("fd00:10:244:2::151", "node-c", podName("v6-only", 1)),
			},
		},
	}
}

func buildSet(specs []svcSpec) *ObjectSet {
	o := &ObjectSet{}
	for _, s := range specs {
		svc, sl := s.build()
		o.add(svc, sl...)
	}
	o.sort()
	return o
}

func smallObjects() *ObjectSet {
	resourceVersion = 1000
	return buildSet(smallSpecs())
}

// masqSpecs: a smaller set for the masqueradeBit scenario.
func masqObjects() *ObjectSet {
	resourceVersion = 1000
	var specs []svcSpec
	keep := map[string]bool{"default/kubernetes": true, "kube-system/kube-dns": true, "shop/web": true, "shop/api": true, "shop/frontend": true, "shop/ingress": true, "shop/dual": true}
	for _, s := range smallSpecs() {
		if keep[s.ns+"/"+s.name] {
			specs = append(specs, s)
		}
	}
	return buildSet(specs)
}

const (
	largeServices  = 55
	largeEndpoints = 20
)

func largeSpec(i, n int) svcSpec {
	name := fmt.Sprintf("svc-%03d", i)
	s := svcSpec{
		ns: "load", name: name,
		clusterIPs: []string{fmt.Sprintf("10.96.%d.%d", 100+i/200, 1+i%200)},
		ports:      []port{{name: "http", port: 80, target: 8080}},
	}
	for j := 0; j < n; j++ {
		if j == 0 {
			// one endpoint of every large Service runs on node-a (pod CIDR 10.244.0.0/24)
			s.v4 = append(s.v4, readyEP(fmt.Sprintf("10.244.0.%d", 160+i), "node-a", podName(name, j)))
			continue
		}
		// the others on node-d .. node-k (pod CIDRs 10.244.3.0/24 .. 10.244.10.0/24)
		nd, c := (j-1)%8, (j-1)/8
		ip := fmt.Sprintf("10.244.%d.%d", 3+nd, 1+i*4+c)
		s.v4 = append(s.v4, readyEP(ip, fmt.Sprintf("node-%c", 'd'+nd), podName(name, j)))
	}
	return s
}

func largeObjects() *ObjectSet {
	resourceVersion = 1000
	specs := smallSpecs()
	for i := 0; i < largeServices; i++ {
		specs = append(specs, largeSpec(i, largeEndpoints))
	}
	return buildSet(specs)
}

// churn: scale load/svc-001 down to 10, load/svc-002 up to 30, delete load/svc-003.
func largeChurn(before *ObjectSet) *ObjectSet {
	after := before.clone()
	replace := func(i, n int) {
		svc, slices := largeSpec(i, n).build()
		for k, s := range after.Slices {
			if s.Namespace == "load" && s.Labels[discovery.LabelServiceName] == svc.Name {
				sl := slices[0]
				sl.ResourceVersion = nextRV()
				after.Slices[k] = sl
			}
		}
	}
	replace(1, 10)
	replace(2, 30)
	var svcs []*v1.Service
	for _, s := range after.Services {
		if s.Namespace == "load" && s.Name == "svc-003" {
			continue
		}
		svcs = append(svcs, s)
	}
	after.Services = svcs
	var sls []*discovery.EndpointSlice
	for _, s := range after.Slices {
		if s.Namespace == "load" && s.Labels[discovery.LabelServiceName] == "svc-003" {
			continue
		}
		sls = append(sls, s)
	}
	after.Slices = sls
	return after
}

var scenarios = []*Scenario{
	{
		Name:          "small-v1.37",
		Description:   "every Service type and traffic policy on a small cluster (kube-proxy v1.37.2, default masqueradeBit 14, small-cluster mode: all comments present)",
		MasqueradeBit: 14,
		Modes:         []string{"iptables", "nftables"},
		Version:       "v1.37",
		Objects:       smallObjects,
	},
	{
		Name:          "large-v1.37",
		Description:   fmt.Sprintf("the small set plus %d IPv4 Services x %d endpoints in namespace load: > 1000 IPv4 endpoints, so the IPv4 iptables proxier is in large-cluster mode (no comments on KUBE-SEP rules and SVC->SEP jumps); the IPv6 proxier stays in small-cluster mode", largeServices, largeEndpoints),
		MasqueradeBit: 14,
		Modes:         []string{"iptables", "nftables"},
		Version:       "v1.37",
		Objects:       largeObjects,
	},
	{
		Name:          "large-churn-v1.37",
		Description:   "large-v1.37, synced once, then load/svc-001 scaled 20->10 endpoints, load/svc-002 scaled 20->30, load/svc-003 deleted, and synced again within syncPeriod (30s): in large-cluster mode stale-chain cleanup is throttled, so the deleted Service's KUBE-SVC/KUBE-SEP chains and svc-001's removed KUBE-SEP chains linger (stale:true in expected.json). iptables/restore-ipv{4,6}.sync1.txt are the fake's state after the first sync; the objects before the churn are exactly large-v1.37/objects.json, objects.json is the state after it.",
		MasqueradeBit: 14,
		Modes:         []string{"iptables"},
		Version:       "v1.37",
		Objects:       largeObjects,
		Churn:         largeChurn,
	},
	{
		Name:          "masq-bit15-v1.37",
		Description:   "a small set with masqueradeBit 15 (mark 0x8000) (kube-proxy v1.37.2)",
		MasqueradeBit: 15,
		Modes:         []string{"iptables", "nftables"},
		Version:       "v1.37",
		Objects:       masqObjects,
	},
	{
		Name:          "topology-v1.37",
		Description:   "trafficDistribution (PreferSameZone, PreferClose, PreferSameNode) and the hints the EndpointSlice controller writes, with kube-proxy told node-a's labels (zone-a) before the first sync: node-a programs only the endpoints its topology selects, except where kube-proxy ignores the hints (a ready endpoint without a hint, no hint for zone-a or node-a) or a Local policy applies; nodes.json holds the Nodes",
		MasqueradeBit: 14,
		Modes:         []string{"iptables", "nftables"},
		Version:       "v1.37",
		Objects:       topologyObjects,
		NodeLabels:    map[string]string{"kubernetes.io/hostname": "node-a", "kubernetes.io/os": "linux", "topology.kubernetes.io/zone": "zone-a", "topology.kubernetes.io/region": "region-1"},
	},
	{
		Name:          "small-v1.34",
		Description:   "the small-v1.37 object set on kube-proxy v1.34.3 (nftables mode still has per-endpoint chains and the mark-for-masquerade chain)",
		MasqueradeBit: 14,
		Modes:         []string{"iptables", "nftables"},
		Version:       "v1.34",
		Objects:       smallObjects,
	},
}

func findScenario(name string) *Scenario {
	for _, s := range scenarios {
		if s.Name == name {
			return s
		}
	}
	return nil
}
