//go:build kpconfig && !kp134

package main

// The v1.37 side of `fixturegen config` (config.go).

import (
	"fmt"

	"k8s.io/component-base/configz"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	proxyconfigapi "k8s.io/kubernetes/pkg/proxy/apis/config"
	v1alpha1conversion "k8s.io/kubernetes/pkg/proxy/apis/config/v1alpha1"
)

// kubeadm v1.37 writes mode: iptables when the user left it empty
// (kubeadm componentconfigs/kubeproxy.go Default, CHANGELOG-1.37 #139777).
const kubeadmDefaultsMode = true

// registerConfigz is what newProxyServer (cmd/kube-proxy/app/server.go:192-204)
// does in v1.37: /configz serves the config converted to the external
// kubeproxy.config.k8s.io/v1alpha1 type, with apiVersion and kind. It is
// converted before the "primary" nodePortAddresses keyword is expanded
// (server.go:234), so configz keeps the keyword.
func registerConfigz(cfg *proxyconfigapi.KubeProxyConfiguration) error {
	externalConfig := &kubeproxyv1alpha1.KubeProxyConfiguration{}
	if err := v1alpha1conversion.Convert_config_KubeProxyConfiguration_To_v1alpha1_KubeProxyConfiguration(cfg, externalConfig, nil); err != nil {
		return fmt.Errorf("unable to convert configz: %w", err)
	}
	externalConfig.SetGroupVersionKind(kubeproxyv1alpha1.SchemeGroupVersion.WithKind("KubeProxyConfiguration"))
	cz, err := configz.New(proxyconfigapi.GroupName)
	if err != nil {
		return fmt.Errorf("unable to register configz: %w", err)
	}
	if err := cz.Set(externalConfig); err != nil {
		return fmt.Errorf("unable to set configz: %w", err)
	}
	return nil
}

// checkProxierConfig: the settings the proxiers read must be what
// proxyConfig gave them.
func checkProxierConfig(sc *Scenario, mode string, cfg *proxyconfigapi.KubeProxyConfiguration) error {
	used := proxyConfig(sc, mode)
	npa := cfg.NodePortAddresses
	if len(npa) == 1 && npa[0] == proxyconfigapi.NodePortAddressesPrimary {
		// expandNodePortAddressKeywords with the node's IPs
		npa = []string{nodeIPv4 + "/32", nodeIPv6 + "/128"}
	}
	for _, c := range []struct {
		what      string
		got, want any
	}{
		{"mode", cfg.Mode, used.Mode},
		{"iptables.masqueradeBit", *cfg.IPTables.MasqueradeBit, *used.IPTables.MasqueradeBit},
		{"nftables.masqueradeBit", *cfg.NFTables.MasqueradeBit, *used.NFTables.MasqueradeBit},
		{"iptables.localhostNodePorts", *cfg.IPTables.LocalhostNodePorts, *used.IPTables.LocalhostNodePorts},
		{"masqueradeAll", cfg.Linux.MasqueradeAll, used.Linux.MasqueradeAll},
		{"syncPeriod", cfg.SyncPeriod, used.SyncPeriod},
		{"minSyncPeriod", cfg.MinSyncPeriod, used.MinSyncPeriod},
		{"detectLocalMode", cfg.DetectLocalMode, used.DetectLocalMode},
		{"clusterCIDRs", cfg.DetectLocal.ClusterCIDRs, used.DetectLocal.ClusterCIDRs},
		{"hostnameOverride", cfg.HostnameOverride, used.HostnameOverride},
		{"nodePortAddresses", npa, used.NodePortAddresses},
	} {
		if err := checkSame(c.what, c.got, c.want); err != nil {
			return err
		}
	}
	return nil
}
