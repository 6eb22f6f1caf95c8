package correlate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"k8s.io/apimachinery/pkg/labels"
	goruntime "runtime"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// decoder decodes the core and discovery kinds (Service, EndpointSlice,
// Node, ConfigMap, Pod, …); other kinds are kept unstructured.
var decoder = func() runtime.Decoder {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := discoveryv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(s).UniversalDeserializer()
}()

// Objects are the API objects a ruleset is joined with. Services and
// EndpointSlices read from JSON by ReadObjects carry the fields the
// analyses read (objects_fast.go lists them), not every field.
type Objects struct {
	Services       []*corev1.Service
	EndpointSlices []*discoveryv1.EndpointSlice
	// Other holds objects of other kinds found in the input (a Node, a
	// ConfigMap), kept for the callers that want them.
	Other []runtime.Object
	// LeftOut counts the objects left out for their names (validnames.go).
	LeftOut LeftOut

	// servicePorts caches ServicePorts: triage joins the same objects with
	// the rules several times.
	servicePorts []*ServicePort
}

// Add appends the objects of o.
func (o *Objects) Add(other *Objects) {
	o.servicePorts = nil
	o.Services = append(o.Services, other.Services...)
	o.EndpointSlices = append(o.EndpointSlices, other.EndpointSlices...)
	o.Other = append(o.Other, other.Other...)
	o.LeftOut.add(other.LeftOut)
}

// ReadObjects reads what `kubectl get services,endpointslices -A -o json`
// (or -o yaml) prints: a List, a single object, or a stream of YAML
// documents / JSON objects. Kinds other than Service and EndpointSlice are
// kept in Other; an input with neither is an error.
//
// JSON is decoded by the fast path (objects_fast.go) where it can be; the
// generic Kubernetes decoder reads the rest.
func ReadObjects(r io.Reader, source string) (*Objects, error) {
	return readObjects(r, source, nil)
}

// ReadServiceObjects is ReadObjects keeping only one Service, its
// EndpointSlices, and the objects of other kinds: explaining one Service
// needs no other.
func ReadServiceObjects(r io.Reader, source string, only ServiceFilter) (*Objects, error) {
	return readObjects(r, source, &only)
}

func readObjects(r io.Reader, source string, only *ServiceFilter) (*Objects, error) {
	data, err := inspect.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	defer releaseInput(len(data))
	objs, seen, ok := decodeFast(data, only)
	if !ok {
		if objs, err = decodeGeneric(bytes.NewReader(data), source); err != nil {
			return nil, err
		}
		seen = len(objs.Services) + len(objs.EndpointSlices) + len(objs.Other)
		if only != nil {
			objs.Services = slices.DeleteFunc(objs.Services, func(s *corev1.Service) bool { return !only.keepService(s.Namespace, s.Name) })
			objs.EndpointSlices = slices.DeleteFunc(objs.EndpointSlices, func(s *discoveryv1.EndpointSlice) bool { return !only.keepSlice(s) })
		}
	}
	if seen == 0 {
		return nil, fmt.Errorf("%s: no Services or EndpointSlices found; expected the output of `kubectl get services,endpointslices -A -o json`", source)
	}
	objs.dropInvalid()
	return objs, nil
}

// bigInput is the size from which an input read whole is worth a garbage
// collection once decoded (releaseInput).
const bigInput = 8 << 20

// releaseInput starts a garbage collection once an input of n bytes, read
// whole, is decoded. It is then the largest garbage of the command, and
// the heap goal is about twice what the model holds by then, so no
// collection would run again before the command ends: attribution and
// rendering would grow the process instead of reusing that memory. On the
// 5,000-Service node it is 30 MB of objects (map -o json's peak RSS 244 →
// 216–221 MiB). The collection runs on a goroutine of its own, while the
// dumps still parse.
func releaseInput(n int) {
	if n >= bigInput {
		go collectGarbage()
	}
}

// collectGarbage is runtime.GC; a test sees it called.
var collectGarbage = goruntime.GC

// decodeGeneric decodes with the Kubernetes decoder: YAML or JSON, every
// field of every object.
func decodeGeneric(r io.Reader, source string) (*Objects, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bufio.NewReaderSize(r, 1<<16), 1<<16)
	objs := &Objects{}
	n := 0
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				break
			}
			return nil, fmt.Errorf("%s: not Kubernetes objects in JSON or YAML: %w", source, err)
		}
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || string(raw) == "null" {
			continue
		}
		if err := objs.decode(raw); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", source, n+1, err)
		}
		n++
	}
	return objs, nil
}

func (o *Objects) decode(raw []byte) error {
	var head struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return err
	}
	if head.Kind == "List" || strings.HasSuffix(head.Kind, "List") && head.Items != nil {
		for i, item := range head.Items {
			if err := o.decode(item); err != nil {
				return fmt.Errorf("item %d: %w", i, err)
			}
		}
		return nil
	}
	if head.Kind == "" {
		return errors.New("object without kind")
	}
	obj, _, err := decoder.Decode(raw, nil, nil)
	if runtime.IsNotRegisteredError(err) {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return fmt.Errorf("%s %s: %w", head.APIVersion, head.Kind, err)
		}
		o.Other = append(o.Other, u)
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s: %w", head.APIVersion, head.Kind, err)
	}
	switch v := obj.(type) {
	case *corev1.Service:
		o.Services = append(o.Services, v)
	case *discoveryv1.EndpointSlice:
		o.EndpointSlices = append(o.EndpointSlices, v)
	default:
		o.Other = append(o.Other, obj)
	}
	return nil
}

// Endpoint is one endpoint of a service port, as kube-proxy sees it.
type Endpoint struct {
	IP          string `json:"ip"`
	Port        int32  `json:"port"`
	Ready       bool   `json:"ready"`
	Serving     bool   `json:"serving"`
	Terminating bool   `json:"terminating"`
	IPv6        bool   `json:"-"`
	NodeName    string `json:"nodeName,omitempty"`
	// Pod is the endpoint's targetRef when it is a Pod.
	Pod  string `json:"pod,omitempty"`
	Zone string `json:"zone,omitempty"`
	// ZoneHints and NodeHints are hints.forZones and hints.forNodes.
	ZoneHints []string `json:"zoneHints,omitempty"`
	NodeHints []string `json:"nodeHints,omitempty"`

	str string // cached String()
}

// String is kube-proxy's endpoint string: "ip:port" or "[ip]:port".
func (e Endpoint) String() string {
	if e.str != "" {
		return e.str
	}
	return EndpointString(e.IP, e.Port)
}

// ServicePort is one port of one Service: kube-proxy's unit of rules.
type ServicePort struct {
	Namespace string
	Name      string
	PortName  string
	Protocol  corev1.Protocol
	Port      int32
	NodePort  int32

	Type            corev1.ServiceType
	ClusterIPs      []string
	ExternalIPs     []string
	LoadBalancerIPs []string
	SourceRanges    []string
	// ExternalLocal/InternalLocal: the traffic policies are Local.
	ExternalLocal bool
	InternalLocal bool
	// AffinitySeconds is ClientIP session affinity's timeout, 0 for none.
	AffinitySeconds     int32
	HealthCheckNodePort int32
	// Proxied is false for headless and ExternalName services, which
	// kube-proxy writes no rules for.
	Proxied bool
	// Selector is the Service's pod selector as kubectl -l takes it, ""
	// for none: where to look when its endpoints are not ready.
	Selector string

	Endpoints []Endpoint

	str string // cached String()
}

// String is kube-proxy's ServicePortName.String().
func (sp *ServicePort) String() string {
	if sp.str == "" {
		sp.str = ServicePortName(sp.Namespace, sp.Name, sp.PortName)
	}
	return sp.str
}

// Proto is the lower-case protocol kube-proxy hashes.
func (sp *ServicePort) Proto() string { return strings.ToLower(string(sp.Protocol)) }

// Warm fills the caches the analyses fill on first use, so that the
// objects can be read by several goroutines at once (a sweep analyses its
// nodes in parallel against one set of objects). Nothing writes to them
// afterwards.
func (o *Objects) Warm() {
	for _, sp := range o.ServicePorts() {
		_ = sp.String()
	}
}

// ServicePorts turns Services and EndpointSlices into service ports with
// their endpoints, the way kube-proxy's change trackers do: slices join
// their Service through the kubernetes.io/service-name label and join a
// port by name and protocol; an endpoint uses its first address.
//
// The result is computed once and shared; callers must not modify it.
func (o *Objects) ServicePorts() []*ServicePort {
	if o.servicePorts == nil {
		o.servicePorts = o.servicePortsUncached()
	}
	return o.servicePorts
}

func (o *Objects) servicePortsUncached() []*ServicePort {
	type key struct {
		ns, name, port string
		proto          corev1.Protocol
	}
	byKey := map[key]*ServicePort{}
	var out []*ServicePort
	for _, svc := range o.Services {
		proxied := svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone && svc.Spec.ClusterIP != ""
		selector := labels.SelectorFromSet(svc.Spec.Selector).String()
		for _, p := range svc.Spec.Ports {
			sp := newServicePort(svc, p, proxied, selector)
			k := key{svc.Namespace, svc.Name, p.Name, sp.Protocol}
			if byKey[k] == nil {
				byKey[k] = sp
				out = append(out, sp)
			}
		}
	}
	for _, slice := range o.EndpointSlices {
		svcName := slice.Labels[discoveryv1.LabelServiceName]
		if svcName == "" || slice.AddressType == discoveryv1.AddressTypeFQDN {
			continue
		}
		for _, port := range slice.Ports {
			if port.Name == nil || port.Port == nil || port.Protocol == nil {
				continue
			}
			sp := byKey[key{slice.Namespace, svcName, *port.Name, *port.Protocol}]
			if sp == nil {
				continue
			}
			for _, ep := range slice.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				e := Endpoint{
					IP:          CanonicalIP(ep.Addresses[0]),
					Port:        *port.Port,
					Ready:       ep.Conditions.Ready == nil || *ep.Conditions.Ready,
					Serving:     ep.Conditions.Serving == nil || *ep.Conditions.Serving,
					Terminating: ep.Conditions.Terminating != nil && *ep.Conditions.Terminating,
					IPv6:        slice.AddressType == discoveryv1.AddressTypeIPv6,
				}
				if ep.NodeName != nil {
					e.NodeName = *ep.NodeName
				}
				if ep.TargetRef != nil && ep.TargetRef.Kind == "Pod" {
					e.Pod = ep.TargetRef.Name
				}
				if ep.Zone != nil {
					e.Zone = *ep.Zone
				}
				if ep.Hints != nil {
					for _, z := range ep.Hints.ForZones {
						e.ZoneHints = append(e.ZoneHints, z.Name)
					}
					for _, n := range ep.Hints.ForNodes {
						e.NodeHints = append(e.NodeHints, n.Name)
					}
				}
				e.str = EndpointString(e.IP, e.Port)
				if sp.Endpoints == nil {
					sp.Endpoints = make([]Endpoint, 0, len(slice.Endpoints))
				}
				sp.Endpoints = append(sp.Endpoints, e)
			}
		}
	}
	for _, sp := range out {
		// kube-proxy orders endpoints by their string (endpointslicecache.go)
		// and keeps one per string when slices overlap, preferring one that
		// is not terminating (a pod IP reused before the old pod is gone).
		sort.SliceStable(sp.Endpoints, func(i, j int) bool {
			a, b := &sp.Endpoints[i], &sp.Endpoints[j]
			if a.str != b.str {
				return a.str < b.str
			}
			return !a.Terminating && b.Terminating
		})
		sp.Endpoints = slices.CompactFunc(sp.Endpoints, func(a, b Endpoint) bool { return a.str == b.str })
	}
	sort.Slice(out, func(i, j int) bool {
		if a, b := out[i].str, out[j].str; a != b {
			return a < b
		}
		return out[i].Protocol < out[j].Protocol
	})
	return out
}

// newServicePort is one port of svc, as kube-proxy's change tracker sees
// it; its endpoints are joined later.
func newServicePort(svc *corev1.Service, p corev1.ServicePort, proxied bool, selector string) *ServicePort {
	sp := &ServicePort{
		str:       ServicePortName(svc.Namespace, svc.Name, p.Name),
		Namespace: svc.Namespace, Name: svc.Name, PortName: p.Name,
		Protocol: p.Protocol, Port: p.Port, NodePort: p.NodePort,
		Type: svc.Spec.Type, ClusterIPs: svc.Spec.ClusterIPs,
		ExternalIPs:         svc.Spec.ExternalIPs,
		SourceRanges:        svc.Spec.LoadBalancerSourceRanges,
		ExternalLocal:       svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
		InternalLocal:       svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal,
		HealthCheckNodePort: svc.Spec.HealthCheckNodePort,
		Proxied:             proxied,
		Selector:            selector,
	}
	if sp.Protocol == "" {
		sp.Protocol = corev1.ProtocolTCP
	}
	if len(sp.ClusterIPs) == 0 && svc.Spec.ClusterIP != "" {
		sp.ClusterIPs = []string{svc.Spec.ClusterIP}
	}
	for _, ing := range svc.Status.LoadBalancer.Ingress {
		if ing.IP != "" {
			sp.LoadBalancerIPs = append(sp.LoadBalancerIPs, ing.IP)
		}
	}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		sp.AffinitySeconds = corev1.DefaultClientIPServiceAffinitySeconds
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			sp.AffinitySeconds = *c.ClientIP.TimeoutSeconds
		}
	}
	return sp
}

// Node returns the Node object of that name among the objects, or nil.
func (o *Objects) Node(name string) *corev1.Node {
	if o == nil || name == "" {
		return nil
	}
	for _, obj := range o.Other {
		if n, ok := obj.(*corev1.Node); ok && n.Name == name {
			return n
		}
	}
	return nil
}

// NodeView is what the objects say of the node the rules come from.
func (o *Objects) NodeView(name string) NodeView {
	nv := NodeView{Name: name}
	if n := o.Node(name); n != nil {
		nv.Labeled, nv.Zone = true, n.Labels[corev1.LabelTopologyZone]
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				nv.IPs = append(nv.IPs, a.Address)
			}
		}
	}
	return nv
}
