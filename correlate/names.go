// Package correlate knows kube-proxy's naming: it recomputes the chain names
// kube-proxy derives from Services and EndpointSlices, and joins them with
// the chains a node holds.
package correlate

import (
	"crypto/sha256"
	"encoding/base32"
	"net"
	"net/netip"
	"strconv"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// ServicePortName renders kube-proxy's ServicePortName.String():
// "ns/name:port", or "ns/name" for an unnamed port.
func ServicePortName(namespace, name, portName string) string {
	s := namespace + "/" + name
	if portName != "" {
		s += ":" + portName
	}
	return s
}

// PortProtoHash is kube-proxy's portProtoHash: the 16 characters shared by
// the KUBE-SVC/SVL/EXT/FW chains of one service port. protocol is
// lower-cased as kube-proxy does.
func PortProtoHash(servicePortName, protocol string) string {
	return hash16(servicePortName, strings.ToLower(protocol), "")
}

// LegacyPortProtoHash is the hash kube-proxy before 1.19 used for an
// unnamed port, which it rendered with a trailing colon ("ns/name:").
func LegacyPortProtoHash(namespace, name, protocol string) string {
	return hash16(LegacyServicePortName(namespace, name, ""), strings.ToLower(protocol), "")
}

// LegacyServicePortName is ServicePortName.String() before 1.19
// (fmt "%s:%s"): "ns/name:port", and "ns/name:" for an unnamed port.
func LegacyServicePortName(namespace, name, portName string) string {
	return namespace + "/" + name + ":" + portName
}

// LegacyEndpointHash is KUBE-SEP's hash before 1.19: an unnamed port's
// endpoint chains, like its service chains, hash "ns/name:".
func LegacyEndpointHash(namespace, name, protocol, endpoint string) string {
	return hash16(LegacyServicePortName(namespace, name, ""), strings.ToLower(protocol), endpoint)
}

// EndpointHash is the 16 characters of KUBE-SEP-: the service port, the
// protocol and the endpoint "ip:port" (IPv6 with brackets).
func EndpointHash(servicePortName, protocol, endpoint string) string {
	return hash16(servicePortName, strings.ToLower(protocol), endpoint)
}

// hash16 is base32std(sha256(a+b+c))[:16], computed without allocating
// more than the result: attribution hashes every endpoint of a cluster.
func hash16(a, b, c string) string {
	var buf [256]byte
	in := append(append(append(buf[:0], a...), b...), c...)
	sum := sha256.Sum256(in)
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], sum[:])
	return string(enc[:16])
}

// ServiceChain returns KUBE-SVC-<hash>.
func ServiceChain(servicePortName, protocol string) string {
	return kubeproxy.PrefixService + PortProtoHash(servicePortName, protocol)
}

// EndpointChain returns KUBE-SEP-<hash>.
func EndpointChain(servicePortName, protocol, endpoint string) string {
	return kubeproxy.PrefixEndpoint + EndpointHash(servicePortName, protocol, endpoint)
}

// EndpointString renders an endpoint as kube-proxy does:
// net.JoinHostPort of the canonical IP text and the port.
func EndpointString(ip string, port int32) string {
	return net.JoinHostPort(CanonicalIP(ip), strconv.Itoa(int(port)))
}

// CanonicalIP returns the canonical text form kube-proxy hashes:
// ParseIPSloppy (IPv4 leading zeros allowed) then String(). Unparsable
// input is returned unchanged.
func CanonicalIP(s string) string {
	if a, err := netip.ParseAddr(s); err == nil && a.Zone() == "" {
		// netip refuses IPv4 leading zeros, so an IPv4 it accepts is
		// already canonical; compare IPv6 without allocating.
		if a.Is4() {
			return s
		}
		var buf [64]byte
		if c := a.AppendTo(buf[:0]); string(c) != s {
			return string(c)
		}
		return s
	}
	if ip := parseIPSloppy(s); ip != nil {
		return ip.String()
	}
	return s
}

// parseIPSloppy is k8s.io/utils/net.ParseIPSloppy: like net.ParseIP but
// accepting IPv4 octets with leading zeros (read as decimal).
func parseIPSloppy(s string) net.IP {
	if ip := net.ParseIP(s); ip != nil {
		return ip
	}
	if strings.Contains(s, ":") {
		return nil
	}
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return nil
	}
	var b [4]byte
	for i, p := range parts {
		n, err := strconv.ParseUint(p, 10, 8)
		if err != nil || p == "" {
			return nil
		}
		b[i] = byte(n)
	}
	return net.IPv4(b[0], b[1], b[2], b[3])
}

// nftBaseLengthMax bounds nftables chain names (pkg/proxy/nftables).
const nftBaseLengthMax = 240

// NFTServiceBase is the name base of a service port's nftables chains:
// "<hash8>-ns/name/proto/portname".
func NFTServiceBase(namespace, name, protocol, portName string) string {
	return hashAndTruncate(namespace + "/" + name + "/" + strings.ToLower(protocol) + "/" + portName)
}

// NFTEndpointBase is the name base of an endpoint chain or affinity set:
// "<hash8>-ns/name/proto/portname__ip/port", with IPv6 ":" turned to ".".
func NFTEndpointBase(namespace, name, protocol, portName, endpoint string) string {
	host, port, err := net.SplitHostPort(endpoint)
	if err != nil {
		host, port = endpoint, ""
	}
	host = strings.ReplaceAll(host, ":", ".")
	return hashAndTruncate(namespace + "/" + name + "/" + strings.ToLower(protocol) + "/" + portName + "__" + host + "/" + port)
}

func hashAndTruncate(s string) string {
	sum := sha256.Sum256([]byte(s))
	name := base32.StdEncoding.EncodeToString(sum[:])[:8] + "-" + s
	if len(name) > nftBaseLengthMax {
		name = name[:nftBaseLengthMax-3] + "..."
	}
	return name
}

// NFTName is a parsed nftables per-service chain name.
type NFTName struct {
	Prefix    string // "service-", "endpoint-", …
	Hash      string
	Namespace string
	Name      string
	Protocol  string // lower case
	PortName  string
	// Endpoint is "ip:port" ("[ip]:port" for IPv6), endpoint names only.
	Endpoint  string
	Truncated bool
	// HashOK is set when the hash matches the readable part (never for a
	// truncated name).
	HashOK bool
}

// ServicePortName returns "ns/name:port" (or "ns/name").
func (n NFTName) ServicePortName() string { return ServicePortName(n.Namespace, n.Name, n.PortName) }

// ParseNFTName splits a kube-proxy nftables chain (or affinity set) name.
// ok is false for names that are not per-service names.
func ParseNFTName(full string) (n NFTName, ok bool) {
	for _, p := range []string{kubeproxy.NFTPrefixService, kubeproxy.NFTPrefixLocal, kubeproxy.NFTPrefixExternal, kubeproxy.NFTPrefixFirewall, kubeproxy.NFTPrefixEndpoint, kubeproxy.NFTPrefixAffinity} {
		if strings.HasPrefix(full, p) {
			n.Prefix = p
			break
		}
	}
	if n.Prefix == "" {
		return n, false
	}
	base := full[len(n.Prefix):]
	if len(base) < 10 || base[8] != '-' {
		return n, false
	}
	n.Hash = base[:8]
	rest := base[9:]
	if strings.HasSuffix(base, "...") && len(base) == nftBaseLengthMax {
		n.Truncated = true
		rest = strings.TrimSuffix(rest, "...")
	} else {
		n.HashOK = hashAndTruncate(rest) == base
	}
	svc, ep, isEP := strings.Cut(rest, "__")
	parts := strings.SplitN(svc, "/", 4)
	if len(parts) < 3 {
		return n, n.Truncated
	}
	n.Namespace, n.Name, n.Protocol = parts[0], parts[1], parts[2]
	if len(parts) == 4 {
		n.PortName = parts[3]
	}
	if isEP {
		host, port, _ := strings.Cut(ep, "/")
		if strings.Contains(host, ".") && strings.Count(host, ".") != 3 || strings.Contains(host, "..") {
			host = strings.ReplaceAll(host, ".", ":")
		}
		if port != "" {
			n.Endpoint = net.JoinHostPort(host, port)
		}
	}
	return n, true
}

// ChainsOfService lists the iptables chains kube-proxy may write for a
// Service's ports: KUBE-SVC/SVL/EXT/FW per port and KUBE-SEP per endpoint
// its EndpointSlices hold, in a stable order. The names come from the API
// objects alone, so a reader can fetch exactly these chains from a node
// instead of the whole table.
func ChainsOfService(sps []*ServicePort) []string {
	var out []string
	seen := map[string]bool{}
	add := func(name string) {
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, sp := range sps {
		spn, proto := sp.String(), sp.Proto()
		h := PortProtoHash(spn, proto)
		for _, prefix := range []string{kubeproxy.PrefixService, kubeproxy.PrefixLocal, kubeproxy.PrefixExternal, kubeproxy.PrefixFirewall} {
			add(prefix + h)
		}
		for i := range sp.Endpoints {
			add(EndpointChain(spn, proto, sp.Endpoints[i].String()))
		}
	}
	return out
}
