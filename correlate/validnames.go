package correlate

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
)

// LeftOut counts the objects an input held that no API server accepts
// for their names: left out of the analysis rather than judged (their
// names would reach chain names, folder names and the terminal).
type LeftOut struct {
	Count int
	// First names the first one and why ("Service default/a\nb: …"),
	// Go-quoted: it is hostile.
	First string
}

// Warning is the one line that reports them, "" when there are none.
func (l LeftOut) Warning() string {
	if l.Count == 0 {
		return ""
	}
	if l.Count == 1 {
		return "1 object with an invalid name left out: " + l.First
	}
	return fmt.Sprintf("%d objects with invalid names left out: first %s", l.Count, l.First)
}

func (l *LeftOut) add(other LeftOut) {
	if l.Count == 0 {
		l.First = other.First
	}
	l.Count += other.Count
}

// dropInvalid leaves out the Services, EndpointSlices and Nodes whose
// names the API server refuses, and counts them in o.LeftOut. Each object
// is judged alone, so no valid object's verdict changes.
//
// A port name that is not a DNS-1123 label (what the API server checks
// on Service and EndpointSlice ports) leaves out its whole object, as the
// API server refuses the object whole: dropping the port alone would judge
// a Service with fewer ports than it has, and escaping it alone would let
// it into chain names.
func (o *Objects) dropInvalid() {
	o.Services = slices.DeleteFunc(o.Services, func(s *corev1.Service) bool {
		return o.leaveOut("Service", s.Namespace, s.Name, invalidService(s))
	})
	// Endpoints repeat a few node names thousands of times: each is
	// checked once.
	nodes := map[string]string{}
	nodeName := func(n string) string {
		why, ok := nodes[n]
		if !ok {
			why = dns1123Subdomain(n)
			nodes[n] = why
		}
		return why
	}
	o.EndpointSlices = slices.DeleteFunc(o.EndpointSlices, func(s *discoveryv1.EndpointSlice) bool {
		return o.leaveOut("EndpointSlice", s.Namespace, s.Name, invalidSlice(s, nodeName))
	})
	o.Other = slices.DeleteFunc(o.Other, func(obj runtime.Object) bool {
		n, ok := obj.(*corev1.Node)
		return ok && o.leaveOut("Node", "", n.Name, dns1123Subdomain(n.Name))
	})
}

// leaveOut counts an object when why is not "".
func (o *Objects) leaveOut(kind, namespace, name, why string) bool {
	if why == "" {
		return false
	}
	if o.LeftOut.Count == 0 {
		id := name
		if namespace != "" {
			id = namespace + "/" + name
		}
		o.LeftOut.First = kind + " " + quoted(id) + ": " + why
	}
	o.LeftOut.Count++
	return true
}

// invalidService says why the API server would refuse s's names: its
// name a DNS-1123 label (RelaxedServiceNameValidation, GA and locked on
// since 1.37, accepts a leading digit: a DNS-1035 check would leave out
// Services a cluster holds), its namespace and port names DNS-1123 labels.
func invalidService(s *corev1.Service) string {
	if why := invalidNamespaced(s.Namespace, s.Name, dns1123Label); why != "" {
		return why
	}
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			if why := dns1123Label(p.Name); why != "" {
				return "port name " + quoted(p.Name) + ": " + why
			}
		}
	}
	return ""
}

// invalidSlice: a DNS-1123 subdomain named slice in a DNS-1123 label
// namespace, its kubernetes.io/service-name a label value (kube-proxy
// joins the slice to the Service it names), its port names DNS-1123
// labels and its endpoints' node names DNS-1123 subdomains.
func invalidSlice(s *discoveryv1.EndpointSlice, nodeName func(string) string) string {
	if why := invalidNamespaced(s.Namespace, s.Name, dns1123Subdomain); why != "" {
		return why
	}
	if svc, ok := s.Labels[discoveryv1.LabelServiceName]; ok {
		if len(svc) > validation.LabelValueMaxLength || !labelChars(svc) {
			if why := first(validation.IsValidLabelValue(svc)); why != "" {
				return discoveryv1.LabelServiceName + " " + quoted(svc) + ": " + why
			}
		}
	}
	for _, p := range s.Ports {
		if p.Name != nil && *p.Name != "" {
			if why := dns1123Label(*p.Name); why != "" {
				return "port name " + quoted(*p.Name) + ": " + why
			}
		}
	}
	for i := range s.Endpoints {
		if n := s.Endpoints[i].NodeName; n != nil {
			if why := nodeName(*n); why != "" {
				return "endpoint nodeName " + quoted(*n) + ": " + why
			}
		}
	}
	return ""
}

// invalidNamespaced checks a name and its namespace. An empty namespace
// is accepted: a manifest written by hand may leave it out.
func invalidNamespaced(namespace, name string, valid func(string) string) string {
	if namespace != "" {
		if why := dns1123Label(namespace); why != "" {
			return "namespace: " + why
		}
	}
	return valid(name)
}

// dns1123Label is validation.IsDNS1123Label's first complaint, "" for a
// valid label. A name the loop accepts is valid; the rest, rare, get the
// library's answer: a regular expression per name is most of the check's
// cost on a cluster of 5,000 Services.
func dns1123Label(s string) string {
	if len(s) <= validation.DNS1123LabelMaxLength && labelChars(s) {
		return ""
	}
	return first(validation.IsDNS1123Label(s))
}

// dns1123Subdomain is validation.IsDNS1123Subdomain's first complaint:
// labels joined by dots, 253 bytes at most (no bound on each label).
func dns1123Subdomain(s string) string {
	if len(s) <= validation.DNS1123SubdomainMaxLength {
		ok := true
		for part := range strings.SplitSeq(s, ".") {
			if !labelChars(part) {
				ok = false
				break
			}
		}
		if ok {
			return ""
		}
	}
	return first(validation.IsDNS1123Subdomain(s))
}

// labelChars: [a-z0-9]([-a-z0-9]*[a-z0-9])?
func labelChars(s string) bool {
	if s == "" || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// first is the first complaint of a validation function, without the
// example and regular expression it ends with: the warning is one line.
func first(errs []string) string {
	if len(errs) == 0 {
		return ""
	}
	why, _, _ := strings.Cut(errs[0], " (e.g. ")
	return why
}

// quoted is a name for the warning: Go-quoted (escaped: it is hostile),
// its first 80 bytes.
func quoted(s string) string {
	if len(s) > 80 {
		return fmt.Sprintf("%q…", strings.ToValidUTF8(s[:80], ""))
	}
	return fmt.Sprintf("%q", s)
}
