//go:build kp134

package main

// kube-proxy v1.34 API: NewProxier takes the settings as separate arguments.

import (
	"context"
	"net"
	"time"

	v1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/events"
	sysctltest "k8s.io/component-helpers/node/util/sysctl/testing"
	proxyconfigapi "k8s.io/kubernetes/pkg/proxy/apis/config"
	"k8s.io/kubernetes/pkg/proxy/iptables"
	"k8s.io/kubernetes/pkg/proxy/metrics"
	"k8s.io/kubernetes/pkg/proxy/nftables"
	proxyutil "k8s.io/kubernetes/pkg/proxy/util"
	utiliptables "k8s.io/kubernetes/pkg/util/iptables"
	iptablestest "k8s.io/kubernetes/pkg/util/iptables/testing"
)

const (
	kubeProxyVersion = "v1.34.3"
	versionTag       = "v1.34"
)

func localDetector(family v1.IPFamily) proxyutil.LocalTrafficDetector {
	if family == v1.IPv4Protocol {
		return proxyutil.NewDetectLocalByCIDR(clusterCIDRv4)
	}
	return proxyutil.NewDetectLocalByCIDR(clusterCIDRv6)
}

func familyNodeIP(family v1.IPFamily) net.IP {
	if family == v1.IPv4Protocol {
		return net.ParseIP(nodeIPv4)
	}
	return net.ParseIP(nodeIPv6)
}

func newFakeIPTables(family v1.IPFamily) *iptablestest.FakeIPTables {
	var f *iptablestest.FakeIPTables
	if family == v1.IPv4Protocol {
		f = iptablestest.NewFake()
	} else {
		f = iptablestest.NewIPv6Fake()
	}
	// iptables 1.8.9 (the kube-proxy image's) supports --random-fully.
	return f.SetHasRandomFully(true)
}

func newIPTablesProxier(ctx context.Context, sc *Scenario, family v1.IPFamily, ipt utiliptables.Interface, recorder events.EventRecorder) (proxier, error) {
	sysctl := sysctltest.NewFake()
	return iptables.NewProxier(ctx, family, ipt, sysctl,
		30*time.Second, 1*time.Second, false, true, sc.MasqueradeBit,
		localDetector(family), nodeName, familyNodeIP(family), recorder, nil, nil, false)
}

func newNFTablesProxier(ctx context.Context, sc *Scenario, family v1.IPFamily, recorder events.EventRecorder) (proxier, any, error) {
	// nftables mode defaults nodePortAddresses to "primary" (the node IPs).
	p, err := nftables.NewProxier(ctx, family, 30*time.Second, 1*time.Second, false, sc.MasqueradeBit,
		localDetector(family), nodeName, familyNodeIP(family), recorder, nil,
		[]string{nodeIPv4 + "/32", nodeIPv6 + "/128"}, false)
	return p, p, err
}

func registerMetrics(mode string) {
	metrics.RegisterMetrics(proxyconfigapi.ProxyMode(mode))
}
