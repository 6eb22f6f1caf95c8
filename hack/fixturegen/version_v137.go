//go:build !kp134

package main

// kube-proxy v1.37 API: NewProxier takes the internal KubeProxyConfiguration.

import (
	"context"
	"net"
	"time"

	v1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	kubeProxyVersion = "v1.37.2"
	versionTag       = "v1.37"
)

func proxyConfig(sc *Scenario, mode string) *proxyconfigapi.KubeProxyConfiguration {
	bit := int32(sc.MasqueradeBit)
	cfg := &proxyconfigapi.KubeProxyConfiguration{
		Mode:             proxyconfigapi.ProxyMode(mode),
		HostnameOverride: nodeName,
		SyncPeriod:       metav1.Duration{Duration: 30 * time.Second},
		MinSyncPeriod:    metav1.Duration{Duration: 1 * time.Second},
		DetectLocalMode:  proxyconfigapi.LocalModeClusterCIDR,
	}
	cfg.DetectLocal.ClusterCIDRs = []string{clusterCIDRv4, clusterCIDRv6}
	cfg.IPTables.MasqueradeBit = &bit
	cfg.IPTables.LocalhostNodePorts = ptrTo(true)
	cfg.NFTables.MasqueradeBit = &bit
	if mode == "nftables" {
		// platformApplyDefaults: nftables mode defaults nodePortAddresses to
		// "primary", which server.go expands to the node IPs.
		cfg.NodePortAddresses = []string{nodeIPv4 + "/32", nodeIPv6 + "/128"}
	}
	return cfg
}

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
	if family == v1.IPv4Protocol {
		return iptablestest.NewFake()
	}
	return iptablestest.NewIPv6Fake()
}

func newIPTablesProxier(ctx context.Context, sc *Scenario, family v1.IPFamily, ipt utiliptables.Interface, recorder events.EventRecorder) (proxier, error) {
	sysctl := sysctltest.NewFake()
	return iptables.NewProxier(ctx, proxyConfig(sc, "iptables"), family, ipt, sysctl,
		localDetector(family), nodeName, familyNodeIP(family), recorder, nil, false)
}

func newNFTablesProxier(ctx context.Context, sc *Scenario, family v1.IPFamily, recorder events.EventRecorder) (proxier, any, error) {
	p, err := nftables.NewProxier(ctx, proxyConfig(sc, "nftables"), family,
		localDetector(family), nodeName, familyNodeIP(family), recorder, nil, false)
	return p, p, err
}

func registerMetrics(mode string) {
	metrics.RegisterMetrics(proxyconfigapi.ProxyMode(mode))
}
