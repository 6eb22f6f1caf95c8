package kpconfig

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// kube-proxy's defaults, applied to a configuration read from either shape.

// apply resolves the mode's values and kube-proxy's defaults.
func (c *Config) apply(raw rawConfig) {
	d := defaults{c: c, internal: raw.internal}
	c.applyMode(raw, d)
	c.applyMasqueradeBits(raw, d)
	c.applyModeSection(raw, d)
	c.ClusterCIDR = raw.clusterCIDR
	c.DetectLocalMode = raw.detectLocalMode
	if c.DetectLocalMode == "" {
		c.DetectLocalMode = "ClusterCIDR"
		d.add(d.name("detectLocalMode", "DetectLocalMode"), "ClusterCIDR")
	}
	c.applyNodePorts(raw, d)
	c.applyBindAddresses(raw, d)
	c.HostnameOverride = raw.hostnameOverride
	c.ConntrackTCPBeLiberal = raw.tcpBeLiberal
	c.applyConntrack(raw.conntrack, raw.tcpBeLiberal, d)
	c.FeatureGates = raw.featureGates
	if c.Defaulted == nil {
		c.Defaulted = []string{}
	}
}

// defaults records in Config.Defaulted the defaults apply fills in, each
// under its field's name in the input's shape.
type defaults struct {
	c        *Config
	internal bool // the internal type: Go field names
}

func (d defaults) add(field, value string) {
	d.c.Defaulted = append(d.c.Defaulted, field+": "+value)
}

// name is a field's name in the input's shape.
func (d defaults) name(v1alpha1, internal string) string {
	if d.internal {
		return internal
	}
	return v1alpha1
}

// applyMode sets the proxy mode, "" defaulted to iptables.
func (c *Config) applyMode(raw rawConfig, d defaults) {
	c.Mode = kubeproxy.Mode(raw.mode)
	if c.Mode == "" {
		c.Mode = kubeproxy.ModeIPTables
		c.ModeDefaulted = true
		d.add(d.name("mode", "Mode"), `"" → iptables (the Linux default; kube-proxy 1.37 warns about it and 1.40 switches the default to nftables)`)
	}
	switch c.Mode {
	case kubeproxy.ModeIPTables, kubeproxy.ModeIPVS, kubeproxy.ModeNFTables, kubeproxy.ModeKernelspace:
	default:
		c.Warnings = append(c.Warnings, fmt.Sprintf("unknown mode %q: kube-proxy would refuse to start", c.Mode))
	}
}

// applyMasqueradeBits sets both sections' masquerade bits and the mode's.
func (c *Config) applyMasqueradeBits(raw rawConfig, d defaults) {
	c.IPTablesMasqueradeBit = c.masqueradeBit(raw.iptBit, d.name("iptables.masqueradeBit", "IPTables.MasqueradeBit"), d)
	c.NFTablesMasqueradeBit = c.masqueradeBit(raw.nftBit, d.name("nftables.masqueradeBit", "NFTables.MasqueradeBit"), d)
	if c.Mode == kubeproxy.ModeNFTables {
		c.MasqueradeBit = c.NFTablesMasqueradeBit
	} else {
		c.MasqueradeBit = c.IPTablesMasqueradeBit
	}
}

// masqueradeBit is a copy of p, or the default when absent; a bit out of
// range is warned about.
func (c *Config) masqueradeBit(p *int32, field string, d defaults) *int32 {
	if p == nil {
		v := int32(kubeproxy.DefaultMasqueradeBit)
		d.add(field, strconv.Itoa(kubeproxy.DefaultMasqueradeBit))
		return &v
	}
	if *p < 0 || *p > 31 {
		c.Warnings = append(c.Warnings, fmt.Sprintf("%s %d is outside [0, 31]: kube-proxy would refuse to start", field, *p))
	}
	v := *p
	return &v
}

// modeSection is what the mode's own section of the configuration says.
type modeSection struct {
	name                      string // "" for the internal type, whose fields are top-level
	sync, minSync, minDefault time.Duration
	masqAll                   bool
}

// sectionOf picks the mode's section's syncPeriod, minSyncPeriod and
// masqueradeAll; zero counts as absent (SetDefaults_KubeProxyConfiguration).
func sectionOf(mode kubeproxy.Mode, raw rawConfig) modeSection {
	s := modeSection{name: "iptables", sync: raw.iptSync, minSync: raw.iptMinSync, masqAll: raw.iptMasqAll,
		minDefault: kubeproxy.DefaultMinSyncPeriod}
	switch mode {
	case kubeproxy.ModeNFTables:
		s.name = "nftables"
		s.sync, s.minSync, s.masqAll = raw.nftSync, raw.nftMinSync, raw.nftMasqAll
	case kubeproxy.ModeIPVS:
		s.name = "ipvs"
		s.sync, s.minSync = raw.ipvsSync, raw.ipvsMinSync
		s.minDefault = 0
	}
	if raw.internal {
		s.name = ""
		s.sync, s.minSync = raw.sync, raw.minSync
		if raw.masqAll != nil {
			s.masqAll = *raw.masqAll
		}
	}
	return s
}

// field is a field's name in the section.
func (s modeSection) field(f string) string {
	if s.name == "" {
		return strings.ToUpper(f[:1]) + f[1:]
	}
	return s.name + "." + f
}

// applyModeSection sets masqueradeAll and the sync periods of the mode's
// section, and configSyncPeriod.
func (c *Config) applyModeSection(raw rawConfig, d defaults) {
	s := sectionOf(c.Mode, raw)
	c.MasqueradeAll = s.masqAll
	c.SyncPeriod = s.sync
	if s.sync == 0 {
		c.SyncPeriod = kubeproxy.DefaultSyncPeriod
		d.add(s.field("syncPeriod"), kubeproxy.DefaultSyncPeriod.String())
	}
	for _, p := range []struct {
		f string
		v time.Duration
	}{{"syncPeriod", s.sync}, {"minSyncPeriod", s.minSync}, {"configSyncPeriod", raw.configSync}} {
		if p.v < 0 {
			c.Warnings = append(c.Warnings, fmt.Sprintf("%s %s is negative: kube-proxy would refuse to start", p.f, p.v))
		}
	}
	c.MinSyncPeriod = s.minSync
	if s.minSync == 0 && s.minDefault != 0 {
		c.MinSyncPeriod = s.minDefault
		d.add(s.field("minSyncPeriod"), s.minDefault.String())
	}
	c.ConfigSyncPeriod = raw.configSync
	if raw.configSync == 0 {
		c.ConfigSyncPeriod = kubeproxy.DefaultConfigSyncPeriod
		d.add(d.name("configSyncPeriod", "ConfigSyncPeriod"), kubeproxy.DefaultConfigSyncPeriod.String())
	}
}

// applyNodePorts sets localhostNodePorts, nodePortAddresses and whether
// the iptables proxier really serves NodePorts on localhost.
func (c *Config) applyNodePorts(raw rawConfig, d defaults) {
	if raw.localhostNodePorts == nil {
		t := true
		c.LocalhostNodePorts = &t
		d.add(d.name("iptables.localhostNodePorts", "IPTables.LocalhostNodePorts"), "true")
	} else {
		v := *raw.localhostNodePorts
		c.LocalhostNodePorts = &v
	}
	c.NodePortAddresses = raw.nodePortAddresses
	if c.Mode == kubeproxy.ModeNFTables && len(c.NodePortAddresses) == 0 {
		c.NodePortAddresses = []string{"primary"}
		d.add(d.name("nodePortAddresses", "NodePortAddresses"), `["primary"] (nftables mode)`)
	}
	c.LocalhostNodePortsEffective = *c.LocalhostNodePorts && nodePortAddressesContainIPv4Loopback(c.NodePortAddresses)
	c.IPVSScheduler = raw.ipvsScheduler
	if c.IPVSScheduler == "" {
		c.IPVSScheduler = "rr"
		if c.Mode == kubeproxy.ModeIPVS {
			d.add(d.name("ipvs.scheduler", "IPVS.Scheduler"), "rr")
		}
	}
}

// applyBindAddresses sets bindAddress and the metrics and healthz
// addresses, whose default hosts follow bindAddress's family.
func (c *Config) applyBindAddresses(raw rawConfig, d defaults) {
	c.BindAddress = raw.bindAddress
	if c.BindAddress == "" {
		c.BindAddress = "0.0.0.0"
		d.add(d.name("bindAddress", "BindAddress"), "0.0.0.0")
	}
	healthzHost, metricsHost := "0.0.0.0", "127.0.0.1"
	if ip := net.ParseIP(c.BindAddress); ip != nil && ip.To4() == nil {
		healthzHost, metricsHost = "[::]", "[::1]"
	}
	c.MetricsBindAddress = d.hostPort(raw.metricsBind, metricsHost, kubeproxy.MetricsPort, "metricsBindAddress", "MetricsBindAddress")
	c.HealthzBindAddress = d.hostPort(raw.healthzBind, healthzHost, kubeproxy.HealthzPort, "healthzBindAddress", "HealthzBindAddress")
}

// hostPort is a host:port setting: the default host with the port when
// absent, a bare IP given the port.
func (d defaults) hostPort(v, defaultHost string, port int, v1alpha1, internal string) string {
	if v == "" {
		v = fmt.Sprintf("%s:%d", defaultHost, port)
		d.add(d.name(v1alpha1, internal), v)
		return v
	}
	return appendPortIfNeeded(v, port)
}

// appendPortIfNeeded is proxyutil.AppendPortIfNeeded: a bare IP gets the
// port; anything else is kept.
func appendPortIfNeeded(addr string, port int) string {
	if _, _, err := net.SplitHostPort(addr); err == nil {
		return addr
	}
	ip := net.ParseIP(addr)
	if ip == nil {
		return addr
	}
	if ip.To4() != nil {
		return fmt.Sprintf("%s:%d", addr, port)
	}
	return fmt.Sprintf("[%s]:%d", addr, port)
}

// nodePortAddressesContainIPv4Loopback follows proxyutil.NewNodePortAddresses
// for IPv4 after expanding the keywords: no IPv4 CIDR means 0.0.0.0/0;
// "primary" is the node's IP, "localhost" 127.0.0.0/8 and "all" 0.0.0.0/0.
func nodePortAddressesContainIPv4Loopback(addrs []string) bool {
	sawIPv4 := false
	loop := net.IPv4(127, 0, 0, 0)
	for _, a := range addrs {
		switch a {
		case "primary":
			sawIPv4 = true // the node IP: not loopback
			continue
		case "localhost", "all":
			return true
		}
		_, cidr, err := net.ParseCIDR(a)
		if err != nil || cidr.IP.To4() == nil {
			continue
		}
		sawIPv4 = true
		if cidr.IP.IsLoopback() || cidr.Contains(loop) {
			return true
		}
	}
	return !sawIPv4
}
