//go:build kpipvs && !kp134

package main

import (
	"k8s.io/apimachinery/pkg/util/sets"
	netlinktest "k8s.io/kubernetes/pkg/proxy/ipvs/testing"
)

// loopbackWhy: where the older address set came from.
const loopbackWhy = "v1.21.14's realIPGetter.NodeIPs, pkg/proxy/ipvs/proxier.go:305-316, takes the src of every local-table " +
	"kernel route but kube-ipvs0's (netlink_linux.go:148-197), 127.0.0.1 and ::1 included; v1.22.0 skips loopback " +
	"(kubernetes/kubernetes#101023, netlink_linux.go:316)"

// loopbackNetlink is the fake netlink handle answering the node-address
// question as kube-proxy <= v1.21 did: the node's addresses plus the
// loopback address of the family. v1.37's handle (and its fake) drop
// loopback (netlink_linux.go:155-165), so only this answer changes.
type loopbackNetlink struct {
	*netlinktest.FakeNetlinkHandle
	loopback string
}

func (h *loopbackNetlink) GetAllLocalAddressesExcept(dev string) (sets.Set[string], error) {
	s, err := h.FakeNetlinkHandle.GetAllLocalAddressesExcept(dev)
	if err != nil {
		return nil, err
	}
	return s.Insert(h.loopback), nil
}
