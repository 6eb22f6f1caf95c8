package kpconfig

import (
	"encoding/json"
	"strconv"
	"time"
)

// ConntrackConfig is kube-proxy's conntrack section after its defaults
// (pkg/proxy/apis/config/v1alpha1/defaults.go): what kube-proxy sets the
// node's conntrack sysctls to at start (pkg/proxy/conntrack/sysctls.go).
// A zero value leaves that sysctl as the node has it.
type ConntrackConfig struct {
	// MaxPerCore × the node's CPUs, at least Min, is the nf_conntrack_max
	// kube-proxy sets (default 32768 and 131072; MaxPerCore 0 leaves it).
	MaxPerCore *int32 `json:"maxPerCore"`
	Min        *int32 `json:"min"`
	// The TCP timeouts (default 24h and 1h) and the UDP ones (default
	// 0: left alone).
	TCPEstablishedTimeout time.Duration `json:"-"`
	TCPCloseWaitTimeout   time.Duration `json:"-"`
	UDPTimeout            time.Duration `json:"-"`
	UDPStreamTimeout      time.Duration `json:"-"`
	// TCPBeLiberal makes kube-proxy set nf_conntrack_tcp_be_liberal.
	TCPBeLiberal bool `json:"tcpBeLiberal"`
}

// MarshalJSON writes the durations as kube-proxy's configuration does ("24h0m0s").
func (c ConntrackConfig) MarshalJSON() ([]byte, error) {
	type plain ConntrackConfig
	return json.Marshal(struct {
		plain
		TCPEstablishedTimeout string `json:"tcpEstablishedTimeout"`
		TCPCloseWaitTimeout   string `json:"tcpCloseWaitTimeout"`
		UDPTimeout            string `json:"udpTimeout"`
		UDPStreamTimeout      string `json:"udpStreamTimeout"`
	}{plain(c), c.TCPEstablishedTimeout.String(), c.TCPCloseWaitTimeout.String(), c.UDPTimeout.String(), c.UDPStreamTimeout.String()})
}

// rawConntrack is the section as the input spelt it.
type rawConntrack struct {
	maxPerCore, min          *int32
	tcpEstablished, tcpClose *time.Duration
	udp, udpStream           time.Duration
}

// readConntrack reads the section at path (conntrack in v1alpha1;
// Linux.Conntrack or Conntrack in the internal type, Go field names).
func (g *cfgGetter) readConntrack(internal bool, path ...string) rawConntrack {
	name := func(v1alpha1, goName string) []string {
		if internal {
			return append(append([]string{}, path...), goName)
		}
		return append(append([]string{}, path...), v1alpha1)
	}
	var raw rawConntrack
	raw.maxPerCore, _ = g.int32(name("maxPerCore", "MaxPerCore")...)
	raw.min, _ = g.int32(name("min", "Min")...)
	if d, ok := g.duration(name("tcpEstablishedTimeout", "TCPEstablishedTimeout")...); ok {
		raw.tcpEstablished = &d
	}
	if d, ok := g.duration(name("tcpCloseWaitTimeout", "TCPCloseWaitTimeout")...); ok {
		raw.tcpClose = &d
	}
	raw.udp, _ = g.duration(name("udpTimeout", "UDPTimeout")...)
	raw.udpStream, _ = g.duration(name("udpStreamTimeout", "UDPStreamTimeout")...)
	return raw
}

// applyConntrack fills in kube-proxy's defaults.
func (c *Config) applyConntrack(raw rawConntrack, tcpBeLiberal bool, d defaults) {
	ct := ConntrackConfig{MaxPerCore: raw.maxPerCore, Min: raw.min, UDPTimeout: raw.udp, UDPStreamTimeout: raw.udpStream, TCPBeLiberal: tcpBeLiberal}
	if ct.MaxPerCore == nil {
		v := int32(32 * 1024)
		ct.MaxPerCore = &v
		d.add(d.name("conntrack.maxPerCore", "Conntrack.MaxPerCore"), strconv.Itoa(int(v)))
	}
	if ct.Min == nil {
		v := int32(128 * 1024)
		ct.Min = &v
		d.add(d.name("conntrack.min", "Conntrack.Min"), strconv.Itoa(int(v)))
	}
	ct.TCPEstablishedTimeout, ct.TCPCloseWaitTimeout = 24*time.Hour, time.Hour
	if raw.tcpEstablished != nil {
		ct.TCPEstablishedTimeout = *raw.tcpEstablished
	} else {
		d.add(d.name("conntrack.tcpEstablishedTimeout", "Conntrack.TCPEstablishedTimeout"), "24h0m0s")
	}
	if raw.tcpClose != nil {
		ct.TCPCloseWaitTimeout = *raw.tcpClose
	} else {
		d.add(d.name("conntrack.tcpCloseWaitTimeout", "Conntrack.TCPCloseWaitTimeout"), "1h0m0s")
	}
	c.Conntrack = ct
}
