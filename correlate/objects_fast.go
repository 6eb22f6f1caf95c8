package correlate

import (
	"bytes"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// The fast path of ReadObjects: Service and EndpointSlice lists in JSON,
// decoded in one pass over the bytes into the fields the analysis reads
// (ServicePorts, and the names), 15 to 20 times faster than the generic
// Kubernetes decoder, which scans each byte several times and fills every
// field of every object.
//
// It agrees with the generic decoder (decodeGeneric) exactly where it
// answers: keys match case-sensitively as the Kubernetes JSON decoder
// matches them (after unescaping), null leaves a field unset, [] and {}
// are empty but not nil. Whatever it does not take as it is goes to the
// generic decoder instead:
//   - an object of another kind or apiVersion (a Node, a ConfigMap,
//     discovery.k8s.io/v1beta1), or one whose fields are odd (a duplicate
//     key, a number where a string is due, a fractional port, a key that
//     differs from apiVersion, kind or items only in case, which the
//     generic decoder's own head matches case-insensitively): that object
//     alone;
//   - malformed JSON, YAML, a top-level value that is not an object: the
//     whole input, so that errors read as they always did.
//
// Objects decoded here carry only the fields listed in fastServiceFields
// and fastSliceFields. Values of other fields are validated as JSON but
// not as their API types: a malformed creationTimestamp, which the
// generic decoder refuses, is skipped here.

// fastDecoder holds what decoding one input shares.
type fastDecoder struct {
	s      jsonScanner
	intern interner
	slab   stringSlab
	// only, when set, keeps only that Service and its slices.
	only *ServiceFilter
	// seenServices/seenSlices count what the input held before only
	// filtered it.
	seenServices, seenSlices int
	// scratch collects a slice's endpoints (addrScratch an endpoint's
	// addresses) before they get their exact room in the blocks: the
	// endpoints, their addresses and targetRefs of every slice are carved
	// from a few big blocks instead of an allocation each (inspect.Blocks).
	scratch     []discoveryv1.Endpoint
	addrScratch []string
	eps         inspect.Blocks[discoveryv1.Endpoint]
	addrs       inspect.Blocks[string]
	refs        inspect.Blocks[corev1.ObjectReference]
	// text holds the strings that do not repeat (names, addresses).
	text inspect.Text
}

// str reads a string value as jsonScanner.str does, a plain one copied
// into the text blocks (one allocation per 16 KB to 4 MB of names and
// addresses instead of one per string).
func (d *fastDecoder) str() string {
	s := &d.s
	if s.peek() != '"' {
		return s.str(nil)
	}
	start := s.pos
	raw, plain := s.scanString()
	switch {
	case s.bad:
		return ""
	case !plain:
		s.pos = start
		return s.str(nil)
	}
	return d.text.String(raw[1 : len(raw)-1])
}

// ServiceFilter names the one Service whose objects to keep.
type ServiceFilter struct{ Namespace, Name string }

func (f *ServiceFilter) keepService(ns, name string) bool {
	return f == nil || f.Namespace == ns && f.Name == name
}

func (f *ServiceFilter) keepSlice(s *discoveryv1.EndpointSlice) bool {
	return f == nil || f.Namespace == s.Namespace && f.Name == s.Labels[discoveryv1.LabelServiceName]
}

// decodeFast decodes data, a stream of JSON objects. seen counts the
// objects the input held (before only filtered them); ok is false when the
// input is not for the fast path: decode it generically instead.
func decodeFast(data []byte, only *ServiceFilter) (o *Objects, seen int, ok bool) {
	d := &fastDecoder{s: jsonScanner{data: data}, only: only}
	if d.s.peek() != '{' {
		return nil, 0, false
	}
	o = &Objects{}
	for d.s.ws(); d.s.pos < len(data); d.s.ws() {
		if d.s.null() {
			continue
		}
		if d.s.peek() != '{' {
			return nil, 0, false
		}
		if err := d.object(o); err != nil || d.s.bad {
			return nil, 0, false
		}
	}
	if d.s.bad {
		return nil, 0, false
	}
	return o, d.seenServices + d.seenSlices + len(o.Other), true
}

// Top-level keys of an object: Service, EndpointSlice, List.
const (
	keyAPIVersion = 1 << iota
	keyKind
	keyItems
	keyMetadata
	keySpec
	keyStatus
	keyAddressType
	keyEndpoints
	keyPorts
)

// fastObject is one object as read, before its kind says what it is.
type fastObject struct {
	apiVersion, kind string
	items            *Objects // items, when present (a List)
	meta             metav1.ObjectMeta
	spec             corev1.ServiceSpec
	status           corev1.ServiceStatus
	addressType      discoveryv1.AddressType
	endpoints        []discoveryv1.Endpoint
	endpointsRaw     []byte // endpoints not decoded yet (only is set)
	ports            []discoveryv1.EndpointPort
}

// seen records a key, and makes a repeated one odd: encoding/json merges
// repeated keys in ways only it should reproduce.
func (s *jsonScanner) seen(mask *uint32, bit uint32) {
	if *mask&bit != 0 {
		s.odd = true
	}
	*mask |= bit
}

// object decodes the object at pos into out: its members first, then
// what its kind makes of them. An object the fast path cannot be sure of
// (odd) goes to the generic decoder whole.
func (d *fastDecoder) object(out *Objects) error {
	s := &d.s
	start := s.pos
	outerOdd := s.odd
	s.odd = false
	var f fastObject
	if err := d.members(&f); err != nil {
		return err
	}
	if s.bad {
		return nil
	}
	odd := s.odd
	s.odd = outerOdd
	raw := s.data[start:s.pos]
	if odd {
		return d.generic(out, raw)
	}
	return d.build(out, &f, raw)
}

// members reads the members of the object at pos into f: those of a
// Service, an EndpointSlice or a List, the rest skipped.
func (d *fastDecoder) members(f *fastObject) error {
	s := &d.s
	var mask uint32
	for more, _ := s.enterObject(); more; more = s.nextMember() {
		k := s.key()
		switch string(k) {
		case "apiVersion":
			s.seen(&mask, keyAPIVersion)
			f.apiVersion = s.str(&d.intern)
		case "kind":
			s.seen(&mask, keyKind)
			f.kind = s.str(&d.intern)
		case "items":
			s.seen(&mask, keyItems)
			if err := d.items(f); err != nil {
				return err
			}
		case "metadata":
			s.seen(&mask, keyMetadata)
			d.metadata(&f.meta)
		case "spec":
			s.seen(&mask, keySpec)
			d.serviceSpec(&f.spec)
		case "status":
			s.seen(&mask, keyStatus)
			d.serviceStatus(&f.status)
		case "addressType":
			s.seen(&mask, keyAddressType)
			f.addressType = discoveryv1.AddressType(s.str(&d.intern))
		case "endpoints":
			s.seen(&mask, keyEndpoints)
			if d.only != nil {
				// Most slices are dropped: decode the endpoints of those
				// kept only, once their metadata is known.
				at := s.pos
				s.skip()
				f.endpointsRaw = s.data[at:s.pos]
			} else {
				f.endpoints = d.endpoints()
			}
		case "ports":
			s.seen(&mask, keyPorts)
			f.ports = d.slicePorts()
		default:
			// The generic decoder finds the head of an object with
			// encoding/json, which matches names case-insensitively.
			if bytes.EqualFold(k, []byte("apiVersion")) || bytes.EqualFold(k, []byte("kind")) || bytes.EqualFold(k, []byte("items")) {
				s.odd = true
			}
			s.skip()
		}
	}
	return nil
}

// items decodes a List's items into f.items; an item that is not an
// object makes the List odd.
func (d *fastDecoder) items(f *fastObject) error {
	s := &d.s
	more, present := s.enterArray()
	if present {
		f.items = &Objects{}
	}
	for ; more; more = s.nextElement() {
		if s.peek() != '{' {
			s.odd = true
			s.skip()
			continue
		}
		if err := d.object(f.items); err != nil {
			return err
		}
	}
	return nil
}

// build adds f, read whole from raw, to out as what its kind says: a
// List's items, a Service or an EndpointSlice (where only keeps them);
// any other kind goes to the generic decoder.
func (d *fastDecoder) build(out *Objects, f *fastObject, raw []byte) error {
	if f.kind == "List" || strings.HasSuffix(f.kind, "List") && f.items != nil {
		if f.items != nil {
			out.Services = append(out.Services, f.items.Services...)
			out.EndpointSlices = append(out.EndpointSlices, f.items.EndpointSlices...)
			out.Other = append(out.Other, f.items.Other...)
		}
		return nil
	}
	switch {
	case f.apiVersion == "v1" && f.kind == "Service":
		d.seenServices++
		if d.only.keepService(f.meta.Namespace, f.meta.Name) {
			out.Services = append(out.Services, &corev1.Service{TypeMeta: metav1.TypeMeta{APIVersion: f.apiVersion, Kind: f.kind}, ObjectMeta: f.meta, Spec: f.spec, Status: f.status})
		}
		return nil
	case f.apiVersion == "discovery.k8s.io/v1" && f.kind == "EndpointSlice":
		d.seenSlices++
		return d.endpointSlice(out, f, raw)
	}
	return d.generic(out, raw)
}

// endpointSlice adds f to out if only keeps it, decoding the endpoints
// members put aside; odd endpoints send the slice to the generic decoder.
func (d *fastDecoder) endpointSlice(out *Objects, f *fastObject, raw []byte) error {
	es := &discoveryv1.EndpointSlice{TypeMeta: metav1.TypeMeta{APIVersion: f.apiVersion, Kind: f.kind}, ObjectMeta: f.meta,
		AddressType: f.addressType, Endpoints: f.endpoints, Ports: f.ports}
	if !d.only.keepSlice(es) {
		return nil
	}
	if f.endpointsRaw != nil {
		sub := jsonScanner{data: f.endpointsRaw}
		save := d.s
		d.s = sub
		es.Endpoints = d.endpoints()
		odd := d.s.odd || d.s.bad
		d.s = save
		if odd {
			return d.generic(out, raw)
		}
	}
	out.EndpointSlices = append(out.EndpointSlices, es)
	return nil
}

// generic decodes one object with the generic decoder, for what the fast
// path does not take.
func (d *fastDecoder) generic(out *Objects, raw []byte) error {
	var one Objects
	if err := one.decode(raw); err != nil {
		return err
	}
	for _, svc := range one.Services {
		d.seenServices++
		if d.only.keepService(svc.Namespace, svc.Name) {
			out.Services = append(out.Services, svc)
		}
	}
	for _, es := range one.EndpointSlices {
		d.seenSlices++
		if d.only.keepSlice(es) {
			out.EndpointSlices = append(out.EndpointSlices, es)
		}
	}
	out.Other = append(out.Other, one.Other...)
	return nil
}

// fastServiceFields and fastSliceFields are the fields the fast path
// fills (besides apiVersion and kind): everything ServicePorts and the
// analyses read. A new reader of another field adds it here and to the
// decoder; TestFastDecoderAgreesOnFixtures compares them with the generic
// decoder, TestFastObjectsSameAnalysis the analyses on both.
var (
	fastServiceFields = []string{"metadata.name", "metadata.namespace", "metadata.labels",
		"spec.type", "spec.clusterIP", "spec.clusterIPs", "spec.ports[].name", "spec.ports[].protocol", "spec.ports[].port", "spec.ports[].nodePort",
		"spec.externalIPs", "spec.loadBalancerSourceRanges", "spec.externalTrafficPolicy", "spec.internalTrafficPolicy", "spec.healthCheckNodePort",
		"spec.sessionAffinity", "spec.sessionAffinityConfig.clientIP.timeoutSeconds", "spec.selector", "status.loadBalancer.ingress[].ip"}
	fastSliceFields = []string{"metadata.name", "metadata.namespace", "metadata.labels", "addressType",
		"endpoints[].addresses", "endpoints[].conditions.ready", "endpoints[].conditions.serving", "endpoints[].conditions.terminating",
		"endpoints[].nodeName", "endpoints[].zone", "endpoints[].hints.forZones[].name", "endpoints[].hints.forNodes[].name",
		"endpoints[].targetRef.kind", "endpoints[].targetRef.name",
		"ports[].name", "ports[].protocol", "ports[].port"}
)

func (d *fastDecoder) metadata(m *metav1.ObjectMeta) {
	s := &d.s
	var mask uint32
	for more, _ := s.enterObject(); more; more = s.nextMember() {
		switch string(s.key()) {
		case "name":
			s.seen(&mask, 1)
			m.Name = d.str()
		case "namespace":
			s.seen(&mask, 2)
			m.Namespace = s.str(&d.intern)
		case "labels":
			s.seen(&mask, 4)
			m.Labels = d.stringMap()
		default:
			s.skip()
		}
	}
}

// stringMap reads an object of strings (labels, a selector): nil for null,
// empty but not nil for {}.
func (d *fastDecoder) stringMap() map[string]string {
	s := &d.s
	var m map[string]string
	more, present := s.enterObject()
	if present {
		m = map[string]string{}
	}
	for ; more; more = s.nextMember() {
		k := string(s.key())
		m[k] = d.str()
	}
	return m
}

func (d *fastDecoder) serviceSpec(sp *corev1.ServiceSpec) {
	s := &d.s
	var mask uint32
	for more, _ := s.enterObject(); more; more = s.nextMember() {
		switch string(s.key()) {
		case "type":
			s.seen(&mask, 1<<0)
			sp.Type = corev1.ServiceType(s.str(&d.intern))
		case "clusterIP":
			s.seen(&mask, 1<<1)
			sp.ClusterIP = d.str()
		case "clusterIPs":
			s.seen(&mask, 1<<2)
			sp.ClusterIPs = s.strings(nil)
		case "ports":
			s.seen(&mask, 1<<3)
			more, present := s.enterArray()
			if present {
				sp.Ports = []corev1.ServicePort{}
			}
			for ; more; more = s.nextElement() {
				sp.Ports = append(sp.Ports, d.servicePort())
			}
		case "externalIPs":
			s.seen(&mask, 1<<4)
			sp.ExternalIPs = s.strings(nil)
		case "loadBalancerSourceRanges":
			s.seen(&mask, 1<<5)
			sp.LoadBalancerSourceRanges = s.strings(nil)
		case "externalTrafficPolicy":
			s.seen(&mask, 1<<6)
			sp.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicy(s.str(&d.intern))
		case "internalTrafficPolicy":
			s.seen(&mask, 1<<7)
			if !s.null() {
				v := corev1.ServiceInternalTrafficPolicy(s.str(&d.intern))
				sp.InternalTrafficPolicy = &v
			}
		case "healthCheckNodePort":
			s.seen(&mask, 1<<8)
			sp.HealthCheckNodePort = s.int32()
		case "sessionAffinity":
			s.seen(&mask, 1<<9)
			sp.SessionAffinity = corev1.ServiceAffinity(s.str(&d.intern))
		case "sessionAffinityConfig":
			s.seen(&mask, 1<<10)
			d.sessionAffinityConfig(&sp.SessionAffinityConfig)
		case "selector":
			s.seen(&mask, 1<<11)
			sp.Selector = d.stringMap()
		default:
			s.skip()
		}
	}
}

func (d *fastDecoder) servicePort() corev1.ServicePort {
	s := &d.s
	var p corev1.ServicePort
	var mask uint32
	for more, _ := s.enterObject(); more; more = s.nextMember() {
		switch string(s.key()) {
		case "name":
			s.seen(&mask, 1)
			p.Name = s.str(&d.intern)
		case "protocol":
			s.seen(&mask, 2)
			p.Protocol = corev1.Protocol(s.str(&d.intern))
		case "port":
			s.seen(&mask, 4)
			p.Port = s.int32()
		case "nodePort":
			s.seen(&mask, 8)
			p.NodePort = s.int32()
		default:
			s.skip()
		}
	}
	return p
}

func (d *fastDecoder) sessionAffinityConfig(dst **corev1.SessionAffinityConfig) {
	s := &d.s
	more, present := s.enterObject()
	if !present {
		return
	}
	c := &corev1.SessionAffinityConfig{}
	*dst = c
	var mask uint32
	for ; more; more = s.nextMember() {
		if string(s.key()) != "clientIP" {
			s.skip()
			continue
		}
		s.seen(&mask, 1)
		more, present := s.enterObject()
		if !present {
			continue
		}
		ci := &corev1.ClientIPConfig{}
		c.ClientIP = ci
		var inner uint32
		for ; more; more = s.nextMember() {
			if string(s.key()) != "timeoutSeconds" {
				s.skip()
				continue
			}
			s.seen(&inner, 1)
			ci.TimeoutSeconds = s.int32Ptr()
		}
	}
}

func (d *fastDecoder) serviceStatus(st *corev1.ServiceStatus) {
	s := &d.s
	var mask uint32
	for more, _ := s.enterObject(); more; more = s.nextMember() {
		if string(s.key()) != "loadBalancer" {
			s.skip()
			continue
		}
		s.seen(&mask, 1)
		var lbMask uint32
		for more, _ := s.enterObject(); more; more = s.nextMember() {
			if string(s.key()) != "ingress" {
				s.skip()
				continue
			}
			s.seen(&lbMask, 1)
			more, present := s.enterArray()
			if present {
				st.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{}
			}
			for ; more; more = s.nextElement() {
				var ing corev1.LoadBalancerIngress
				var ingMask uint32
				for more, _ := s.enterObject(); more; more = s.nextMember() {
					if string(s.key()) != "ip" {
						s.skip()
						continue
					}
					s.seen(&ingMask, 1)
					ing.IP = s.str(nil)
				}
				st.LoadBalancer.Ingress = append(st.LoadBalancer.Ingress, ing)
			}
		}
	}
}

func (d *fastDecoder) endpoints() []discoveryv1.Endpoint {
	s := &d.s
	more, present := s.enterArray()
	if !present {
		return nil
	}
	out := d.scratch[:0]
	for ; more; more = s.nextElement() {
		var ep discoveryv1.Endpoint
		var mask uint32
		for more, _ := s.enterObject(); more; more = s.nextMember() {
			switch string(s.key()) {
			case "addresses":
				s.seen(&mask, 1)
				more, present := s.enterArray()
				if !present {
					break
				}
				addrs := d.addrScratch[:0]
				for ; more; more = s.nextElement() {
					addrs = append(addrs, d.str())
				}
				d.addrScratch = addrs
				// Capacity-limited: an append never writes into the next.
				ep.Addresses = d.addrs.Take(len(addrs))
				copy(ep.Addresses, addrs)
			case "conditions":
				s.seen(&mask, 2)
				var cmask uint32
				for more, _ := s.enterObject(); more; more = s.nextMember() {
					switch string(s.key()) {
					case "ready":
						s.seen(&cmask, 1)
						ep.Conditions.Ready = s.boolPtr()
					case "serving":
						s.seen(&cmask, 2)
						ep.Conditions.Serving = s.boolPtr()
					case "terminating":
						s.seen(&cmask, 4)
						ep.Conditions.Terminating = s.boolPtr()
					default:
						s.skip()
					}
				}
			case "nodeName":
				s.seen(&mask, 4)
				ep.NodeName = s.strPtr(&d.intern, &d.slab)
			case "zone":
				s.seen(&mask, 8)
				ep.Zone = s.strPtr(&d.intern, &d.slab)
			case "hints":
				s.seen(&mask, 16)
				ep.Hints = d.hints()
			case "targetRef":
				s.seen(&mask, 32)
				ep.TargetRef = d.targetRef()
			default:
				s.skip()
			}
		}
		out = append(out, ep)
	}
	d.scratch = out[:0]
	eps := d.eps.Take(len(out))
	copy(eps, out)
	return eps
}

// targetRef reads an endpoint's targetRef: its kind and name.
func (d *fastDecoder) targetRef() *corev1.ObjectReference {
	s := &d.s
	more, present := s.enterObject()
	if !present {
		return nil
	}
	ref := d.refs.One()
	var mask uint32
	for ; more; more = s.nextMember() {
		switch string(s.key()) {
		case "kind":
			s.seen(&mask, 1)
			ref.Kind = s.str(&d.intern)
		case "name":
			s.seen(&mask, 2)
			ref.Name = d.str()
		default:
			s.skip()
		}
	}
	return ref
}

func (d *fastDecoder) hints() *discoveryv1.EndpointHints {
	s := &d.s
	more, present := s.enterObject()
	if !present {
		return nil
	}
	h := &discoveryv1.EndpointHints{}
	var mask uint32
	for ; more; more = s.nextMember() {
		switch string(s.key()) {
		case "forZones":
			s.seen(&mask, 1)
			more, present := s.enterArray()
			if present {
				h.ForZones = []discoveryv1.ForZone{}
			}
			for ; more; more = s.nextElement() {
				h.ForZones = append(h.ForZones, discoveryv1.ForZone{Name: d.nameOnly()})
			}
		case "forNodes":
			s.seen(&mask, 2)
			more, present := s.enterArray()
			if present {
				h.ForNodes = []discoveryv1.ForNode{}
			}
			for ; more; more = s.nextElement() {
				h.ForNodes = append(h.ForNodes, discoveryv1.ForNode{Name: d.nameOnly()})
			}
		default:
			s.skip()
		}
	}
	return h
}

// nameOnly reads {"name": …}, the shape of a zone or node hint.
func (d *fastDecoder) nameOnly() string {
	s := &d.s
	name := ""
	var mask uint32
	for more, _ := s.enterObject(); more; more = s.nextMember() {
		if string(s.key()) != "name" {
			s.skip()
			continue
		}
		s.seen(&mask, 1)
		name = s.str(&d.intern)
	}
	return name
}

func (d *fastDecoder) slicePorts() []discoveryv1.EndpointPort {
	s := &d.s
	more, present := s.enterArray()
	if !present {
		return nil
	}
	out := []discoveryv1.EndpointPort{}
	for ; more; more = s.nextElement() {
		var p discoveryv1.EndpointPort
		var mask uint32
		for more, _ := s.enterObject(); more; more = s.nextMember() {
			switch string(s.key()) {
			case "name":
				s.seen(&mask, 1)
				p.Name = s.strPtr(&d.intern, &d.slab)
			case "protocol":
				s.seen(&mask, 2)
				if v := s.strPtr(&d.intern, &d.slab); v != nil {
					proto := corev1.Protocol(*v)
					p.Protocol = &proto
				}
			case "port":
				s.seen(&mask, 4)
				p.Port = s.int32Ptr()
			default:
				s.skip()
			}
		}
		out = append(out, p)
	}
	return out
}
