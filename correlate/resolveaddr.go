package correlate

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ServiceByAddress finds the Service an address belongs to, as people name
// it from a failing client: a cluster IP, an external or load-balancer IP,
// with a port or without. port 0 is any; with a port, the Service port of
// that number is returned ("" without).
func ServiceByAddress(objs *Objects, addr netip.Addr, port uint16) (svc *corev1.Service, servicePort string, err error) {
	addr = addr.Unmap()
	var found []*corev1.Service
	for _, s := range objs.Services {
		if slices.ContainsFunc(serviceAddresses(s), func(a string) bool {
			p, err := netip.ParseAddr(a)
			return err == nil && p.Unmap() == addr
		}) {
			found = append(found, s)
		}
	}
	if port != 0 {
		var withPort []*corev1.Service
		for _, s := range found {
			if slices.ContainsFunc(s.Spec.Ports, func(p corev1.ServicePort) bool { return p.Port == int32(port) }) {
				withPort = append(withPort, s)
			}
		}
		if len(withPort) == 0 && len(found) > 0 {
			s := found[0]
			return nil, "", fmt.Errorf("service %s/%s has the address %s, but no port %d (its ports: %s)", s.Namespace, s.Name, addr, port, strings.Join(portList(s), ", "))
		}
		found = withPort
	}
	switch len(found) {
	case 0:
		return nil, "", &NoCurrentServiceError{fmt.Sprintf("no Service has the address %s (cluster, external or load-balancer IP): check it with kubectl get services -A -o wide", addr)}
	case 1:
		if port != 0 {
			servicePort = strconv.Itoa(int(port))
		}
		return found[0], servicePort, nil
	}
	names := make([]string, len(found))
	for i, s := range found {
		names[i] = s.Namespace + "/" + s.Name
	}
	return nil, "", fmt.Errorf("the address %s belongs to %d Services (%s): name one with svc/NAME -n NAMESPACE", addr, len(found), strings.Join(names, ", "))
}

// serviceAddresses are the addresses a client reaches the Service at.
func serviceAddresses(s *corev1.Service) []string {
	addrs := append([]string{s.Spec.ClusterIP}, s.Spec.ClusterIPs...)
	addrs = append(addrs, s.Spec.ExternalIPs...)
	for _, in := range s.Status.LoadBalancer.Ingress {
		addrs = append(addrs, in.IP)
	}
	return addrs
}

// ServiceDNSName reads a Service's DNS name: NAME.NAMESPACE,
// NAME.NAMESPACE.svc or NAME.NAMESPACE.svc.CLUSTER-DOMAIN (a Service's
// name holds no dot, so any dotted name is one of these).
func ServiceDNSName(s string) (namespace, name string, ok bool) {
	labels := strings.Split(strings.TrimSuffix(s, "."), ".")
	if len(labels) < 2 || len(labels) > 2 && labels[2] != "svc" || labels[0] == "" || labels[1] == "" {
		return "", "", false
	}
	return labels[1], labels[0], true
}
