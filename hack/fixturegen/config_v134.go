//go:build kpconfig && kp134

package main

// The v1.34 side of `fixturegen config` (config.go).

import (
	"fmt"
	"time"

	"k8s.io/component-base/configz"
	proxyconfigapi "k8s.io/kubernetes/pkg/proxy/apis/config"
)

// kubeadm v1.34 leaves mode empty when the user did not set it.
const kubeadmDefaultsMode = false

// registerConfigz is what newProxyServer (cmd/kube-proxy/app/server.go:190-194)
// does in v1.34: /configz serves the INTERNAL config object (no json tags:
// Go field names, no apiVersion/kind), by pointer, so the later rewrite of
// the "primary" nodePortAddresses keyword (server.go:224-233) shows in it.
func registerConfigz(cfg *proxyconfigapi.KubeProxyConfiguration) error {
	cz, err := configz.New(proxyconfigapi.GroupName)
	if err != nil {
		return fmt.Errorf("unable to register configz: %s", err)
	}
	cz.Set(cfg)
	if len(cfg.NodePortAddresses) == 1 && cfg.NodePortAddresses[0] == proxyconfigapi.NodePortAddressesPrimary {
		cfg.NodePortAddresses = []string{nodeIPv4 + "/32", nodeIPv6 + "/128"}
	}
	return nil
}

// checkProxierConfig: the settings must be the NewProxier arguments above.
func checkProxierConfig(sc *Scenario, mode string, cfg *proxyconfigapi.KubeProxyConfiguration) error {
	npa := cfg.NodePortAddresses
	if len(npa) == 1 && npa[0] == proxyconfigapi.NodePortAddressesPrimary {
		npa = []string{nodeIPv4 + "/32", nodeIPv6 + "/128"}
	}
	checks := []struct {
		what      string
		got, want any
	}{
		{"mode", string(cfg.Mode), mode},
		{"iptables.masqueradeBit", *cfg.IPTables.MasqueradeBit, sc.MasqueradeBit},
		{"nftables.masqueradeBit", *cfg.NFTables.MasqueradeBit, sc.MasqueradeBit},
		{"iptables.localhostNodePorts", *cfg.IPTables.LocalhostNodePorts, true},
		{"masqueradeAll", cfg.Linux.MasqueradeAll, false},
		{"syncPeriod", cfg.SyncPeriod.Duration, 30 * time.Second},
		{"minSyncPeriod", cfg.MinSyncPeriod.Duration, 1 * time.Second},
		{"detectLocalMode", string(cfg.DetectLocalMode), "ClusterCIDR"},
		{"clusterCIDRs", cfg.DetectLocal.ClusterCIDRs, []string{clusterCIDRv4, clusterCIDRv6}},
		{"hostnameOverride", cfg.HostnameOverride, nodeName},
	}
	if mode == "nftables" {
		checks = append(checks, struct {
			what      string
			got, want any
		}{"nodePortAddresses", npa, []string{nodeIPv4 + "/32", nodeIPv6 + "/128"}})
	}
	for _, c := range checks {
		if err := checkSame(c.what, c.got, c.want); err != nil {
			return err
		}
	}
	return nil
}
