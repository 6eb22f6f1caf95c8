package correlate

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/internal/textdist"
)

// NoCurrentServiceError says no current Service answers what was asked
// (an address, a chain), though the rules may still hold a deleted one's:
// explain looks for it among the stale chains (FormerService).
type NoCurrentServiceError struct{ msg string }

func (e *NoCurrentServiceError) Error() string { return e.msg }

// ServiceNotFoundError says a Service is not in the objects, with what the
// asker most likely meant: the namespaces where a Service of that name does
// exist (a forgotten -n), and names close to it (a typo).
type ServiceNotFoundError struct {
	Namespace, Name string
	// Elsewhere are the namespaces holding a Service of that name.
	Elsewhere []string
	// Similar are close names ("ns/name"), closest first.
	Similar []string
}

func (e *ServiceNotFoundError) Error() string {
	where := "service " + e.Name + " not found in any namespace"
	if e.Namespace != "" {
		where = "service " + e.Namespace + "/" + e.Name + " not found"
	}
	switch {
	case len(e.Elsewhere) == 1:
		return fmt.Sprintf("%s; it exists in namespace %s: add -n %s", where, e.Elsewhere[0], e.Elsewhere[0])
	case len(e.Elsewhere) > 1:
		return fmt.Sprintf("%s; it exists in namespaces %s: add -n with one of them", where, strings.Join(e.Elsewhere, ", "))
	}
	if len(e.Similar) > 0 {
		return fmt.Sprintf("%s; did you mean %s?", where, strings.Join(e.suggestions(), " or "))
	}
	return where + " in the objects"
}

// suggestions are the similar names as svc/NAME, with -n when the namespace
// differs from the one asked.
func (e *ServiceNotFoundError) suggestions() []string {
	out := make([]string, len(e.Similar))
	for i, s := range e.Similar {
		ns, name, _ := strings.Cut(s, "/")
		out[i] = "svc/" + name
		if ns != e.Namespace {
			out[i] += " -n " + ns
		}
	}
	return out
}

// AmbiguousServiceError: the name, looked up in every namespace (-A),
// exists in several.
type AmbiguousServiceError struct {
	Name       string
	Namespaces []string
}

func (e *AmbiguousServiceError) Error() string {
	return fmt.Sprintf("service %s exists in namespaces %s: pass -n with one of them", e.Name, strings.Join(e.Namespaces, ", "))
}

// PortNotFoundError says a Service has no port by that name or number, and
// lists the ports it has.
type PortNotFoundError struct {
	Namespace, Name, Port string
	Ports                 []string
}

func (e *PortNotFoundError) Error() string {
	if len(e.Ports) == 0 {
		return fmt.Sprintf("service %s/%s has no port %q (it has no ports)", e.Namespace, e.Name, e.Port)
	}
	return fmt.Sprintf("service %s/%s has no port %q; its ports: %s", e.Namespace, e.Name, e.Port, strings.Join(e.Ports, ", "))
}

// ResolveService finds the Service namespace/name in objs; namespace ""
// looks in every namespace and succeeds when exactly one has the name.
func ResolveService(objs *Objects, namespace, name string) (*corev1.Service, error) {
	return resolveService(objs, servicesByName(objs), namespace, name)
}

// servicesByName indexes Services by name, so that explaining every
// Service does not scan them all for each.
func servicesByName(objs *Objects) map[string][]*corev1.Service {
	idx := make(map[string][]*corev1.Service, len(objs.Services))
	for _, s := range objs.Services {
		idx[s.Name] = append(idx[s.Name], s)
	}
	return idx
}

func resolveService(objs *Objects, byName map[string][]*corev1.Service, namespace, name string) (*corev1.Service, error) {
	var found []*corev1.Service
	for _, s := range byName[name] {
		if namespace == "" || s.Namespace == namespace {
			found = append(found, s)
		}
	}
	switch {
	case len(found) == 1:
		return found[0], nil
	case len(found) > 1:
		nss := make([]string, len(found))
		for i, s := range found {
			nss[i] = s.Namespace
		}
		sort.Strings(nss)
		return nil, &AmbiguousServiceError{Name: name, Namespaces: nss}
	}
	e := &ServiceNotFoundError{Namespace: namespace, Name: name}
	type near struct {
		key  string
		dist int
	}
	var candidates []near
	for _, s := range objs.Services {
		if s.Name == name {
			e.Elsewhere = append(e.Elsewhere, s.Namespace)
			continue
		}
		if d, ok := similar(name, s.Name); ok {
			// A typo in the namespace asked ranks before one elsewhere.
			if namespace != "" && s.Namespace != namespace {
				d += 2
			}
			candidates = append(candidates, near{s.Namespace + "/" + s.Name, d})
		}
	}
	sort.Strings(e.Elsewhere)
	sort.Slice(candidates, func(i, j int) bool {
		if candidates[i].dist != candidates[j].dist {
			return candidates[i].dist < candidates[j].dist
		}
		return candidates[i].key < candidates[j].key
	})
	for i := 0; i < len(candidates) && i < 3 && len(e.Elsewhere) == 0; i++ {
		e.Similar = append(e.Similar, candidates[i].key)
	}
	return nil, e
}

// similar reports whether b is a plausible typo of a: within an edit
// distance of a third of the name (at least 1, at most 3), or one starts
// with the other.
func similar(a, b string) (int, bool) {
	if strings.HasPrefix(b, a) || strings.HasPrefix(a, b) {
		return 1, true
	}
	limit := min(max(len(a)/3, 1), 3)
	d := textdist.Levenshtein(a, b, limit)
	return d, d <= limit
}

// portList describes a Service's ports for an error: "http 80/TCP".
func portList(s *corev1.Service) []string {
	out := make([]string, 0, len(s.Spec.Ports))
	for _, p := range s.Spec.Ports {
		d := strconv.Itoa(int(p.Port)) + "/" + string(p.Protocol)
		if p.Name != "" {
			d = p.Name + " " + d
		}
		out = append(out, d)
	}
	return out
}

// ParseServicePortName splits "namespace/name:port" (port optional), the
// form ServicePortName writes.
func ParseServicePortName(s string) (namespace, name, port string, ok bool) {
	namespace, rest, ok := strings.Cut(s, "/")
	if !ok || namespace == "" || rest == "" {
		return "", "", "", false
	}
	name, port, _ = strings.Cut(rest, ":")
	return namespace, name, port, name != ""
}
