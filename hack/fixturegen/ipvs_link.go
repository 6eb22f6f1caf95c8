//go:build kpipvs && !kp134

package main

import (
	"bytes"
	"net"
	"os/exec"
	"sort"
	"strings"
)

// kubeIPVS0MAC: a fixed, locally administered address for the stand-in
// link, so the file does not change on every run (a real kube-ipvs0 gets a
// random one).
const kubeIPVS0MAC = "02:00:00:00:00:01"

// boundAddrs are the addresses kube-proxy bound to kube-ipvs0 (the fake
// netlink handles' EnsureAddressBind), IPv4 then IPv6, each in numeric
// order (kube-proxy binds them in map order, which differs on every run).
func (run *ipvsRun) boundAddrs() []net.IP {
	var ips []net.IP
	for _, f := range families {
		set, _ := run.nl[f].GetLocalAddresses("kube-ipvs0")
		var fam []net.IP
		for a := range set {
			fam = append(fam, net.ParseIP(a))
		}
		sort.Slice(fam, func(i, j int) bool { return bytes.Compare(fam[i].To16(), fam[j].To16()) < 0 })
		ips = append(ips, fam...)
	}
	return ips
}

// showKubeIPVS0 makes kube-ipvs0 in the namespace with the addresses
// kube-proxy bound and saves `ip addr show kube-ipvs0`. The generator's
// kernel has no dummy links, so the link is an ifb: the same flags as
// kube-proxy's dummy (BROADCAST,NOARP, left down, qdisc noop); its qlen and
// MAC differ. Addresses are added as kube-proxy's EnsureAddressBind adds
// them: a host prefix, no flags (netlink_linux.go).
func (run *ipvsRun) showKubeIPVS0(dir string) error {
	cmds := [][]string{
		// an ifb's address can only be given when it is made
		{"ip", "link", "add", "kube-ipvs0", "address", kubeIPVS0MAC, "type", "ifb"},
	}
	for _, ip := range run.boundAddrs() {
		if ip.To4() != nil {
			cmds = append(cmds, []string{"ip", "addr", "add", ip.String() + "/32", "dev", "kube-ipvs0"})
		} else {
			cmds = append(cmds, []string{"ip", "-6", "addr", "add", ip.String() + "/128", "dev", "kube-ipvs0"})
		}
	}
	for _, c := range cmds {
		if out, err := exec.Command(c[0], c[1:]...).CombinedOutput(); err != nil {
			return &cmdError{c, out, err}
		}
	}
	if _, err := runTool(dir, "", "ip-addr-kube-ipvs0.txt", "ip", "addr", "show", "kube-ipvs0"); err != nil {
		return err
	}
	// what a live read of the kube-proxy image sees instead (it has no ip):
	// the kernel's local routes and IPv6 addresses
	if _, err := runTool(dir, "", "proc-net-fib_trie.txt", "cat", "/proc/net/fib_trie"); err != nil {
		return err
	}
	_, err := runTool(dir, "", "proc-net-if_inet6.txt", "cat", "/proc/net/if_inet6")
	return err
}

type cmdError struct {
	argv []string
	out  []byte
	err  error
}

func (e *cmdError) Error() string {
	return strings.Join(e.argv, " ") + ": " + e.err.Error() + ": " + string(e.out)
}
