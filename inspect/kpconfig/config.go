// Package kpconfig reads kube-proxy's configuration: its /configz output, a
// KubeProxyConfiguration file or the kube-proxy ConfigMap, with kube-proxy's
// defaults applied.
package kpconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// Kube-proxy configuration, as far as reading its rules needs it.
//
// Three inputs say what a kube-proxy runs with, and Parse tells
// them apart by their content:
//
//   - its /configz endpoint: {"kubeproxy.config.k8s.io": {...}}. Since 1.37
//     the inner object is the external kubeproxy.config.k8s.io/v1alpha1 type
//     (cmd/kube-proxy/app/server.go converts the internal config before
//     registering it); before, it was the internal type, whose JSON has Go's
//     field names (`"IPTables": {"MasqueradeBit": 14}`, `"SyncPeriod": "30s"`)
//     and already holds every default.
//   - a KubeProxyConfiguration file (kubeproxy.config.k8s.io/v1alpha1), YAML
//     or JSON, as given to --config.
//   - the kube-system/kube-proxy ConfigMap that kubeadm writes, as YAML or
//     JSON (`kubectl get cm -o yaml|json`, a single object or a List), with
//     the configuration in data["config.conf"].

// Config is the part of a KubeProxyConfiguration that rule diagnosis
// uses, with kube-proxy's defaults applied.
type Config struct {
	// Source names the input; Format says what it was: "configz",
	// "configz-internal" (a /configz of kube-proxy ≤ 1.36, or its inner
	// object), "KubeProxyConfiguration" or "ConfigMap".
	Source string `json:"source"`
	Format string `json:"format"`
	// APIVersion is the apiVersion of the configuration ("" for the
	// internal type).
	APIVersion string `json:"apiVersion,omitempty"`
	// ConfigMapKey is the data key the configuration came from.
	ConfigMapKey string `json:"configMapKey,omitempty"`

	// Mode is the proxy mode after defaulting: "" becomes "iptables" on
	// Linux. ModeDefaulted is set when the input left it empty.
	Mode          kubeproxy.Mode `json:"mode"`
	ModeDefaulted bool           `json:"modeDefaulted,omitempty"`
	// MasqueradeBit is the bit for Mode: nftables.masqueradeBit in nftables
	// mode, iptables.masqueradeBit otherwise (ipvs uses the iptables one).
	MasqueradeBit         *int32 `json:"masqueradeBit"`
	IPTablesMasqueradeBit *int32 `json:"iptablesMasqueradeBit"`
	NFTablesMasqueradeBit *int32 `json:"nftablesMasqueradeBit"`
	// MasqueradeAll is iptables.masqueradeAll or nftables.masqueradeAll,
	// for Mode.
	MasqueradeAll bool `json:"masqueradeAll"`
	// SyncPeriod and MinSyncPeriod are those of Mode's section. JSON writes
	// durations as kube-proxy does ("30s").
	SyncPeriod       time.Duration `json:"syncPeriod"`
	MinSyncPeriod    time.Duration `json:"minSyncPeriod"`
	ConfigSyncPeriod time.Duration `json:"configSyncPeriod"`
	// ClusterCIDR is clusterCIDR, comma-separated for dual-stack (the
	// internal type's detectLocal.clusterCIDRs joined).
	ClusterCIDR     string `json:"clusterCIDR,omitempty"`
	DetectLocalMode string `json:"detectLocalMode"`
	// LocalhostNodePorts is iptables.localhostNodePorts (default true).
	// LocalhostNodePortsEffective is what the iptables proxier does with
	// it: it is forced off unless nodePortAddresses includes IPv4 loopback
	// (the default, empty list means 0.0.0.0/0, which does). When it is on,
	// kube-proxy writes (and counts) the IPv4 KUBE-FIREWALL rule.
	LocalhostNodePorts          *bool `json:"localhostNodePorts"`
	LocalhostNodePortsEffective bool  `json:"localhostNodePortsEffective"`
	// NodePortAddresses as configured; in nftables mode an empty list
	// becomes ["primary"].
	NodePortAddresses []string `json:"nodePortAddresses"`
	// IPVSScheduler is ipvs.scheduler after defaulting ("" becomes "rr",
	// pkg/proxy/ipvs/proxier.go:92): what every virtual server should use.
	IPVSScheduler      string `json:"ipvsScheduler,omitempty"`
	BindAddress        string `json:"bindAddress"`
	MetricsBindAddress string `json:"metricsBindAddress"`
	HealthzBindAddress string `json:"healthzBindAddress"`
	HostnameOverride   string `json:"hostnameOverride,omitempty"`
	// ConntrackTCPBeLiberal makes kube-proxy set nf_conntrack_tcp_be_liberal,
	// which drops the KUBE-FORWARD INVALID rule.
	ConntrackTCPBeLiberal bool            `json:"conntrackTCPBeLiberal,omitempty"`
	FeatureGates          map[string]bool `json:"featureGates,omitempty"`
	// Conntrack is the conntrack section with kube-proxy's defaults.
	Conntrack ConntrackConfig `json:"conntrack"`

	// Defaulted lists the fields that were absent (or zero where kube-proxy
	// treats zero as absent) and got kube-proxy's default, with the value.
	Defaulted []string `json:"defaulted"`
	// Warnings are things kube-proxy would reject or that look wrong.
	Warnings []string `json:"warnings,omitempty"`
}

// MarshalJSON writes the durations as strings ("30s"), as kube-proxy's
// configuration does.
func (c Config) MarshalJSON() ([]byte, error) {
	type plain Config
	return json.Marshal(struct {
		plain
		SyncPeriod       string `json:"syncPeriod"`
		MinSyncPeriod    string `json:"minSyncPeriod"`
		ConfigSyncPeriod string `json:"configSyncPeriod"`
	}{plain(c), c.SyncPeriod.String(), c.MinSyncPeriod.String(), c.ConfigSyncPeriod.String()})
}

// The group of kube-proxy's configuration: the key of /configz.
const proxyConfigGroup = "kubeproxy.config.k8s.io"

const maxConfigSize = 8 << 20

// Parse reads kube-proxy's configuration from /configz output, a
// KubeProxyConfiguration file or the kube-proxy ConfigMap (YAML or JSON),
// telling them apart by content, and applies kube-proxy's defaults.
func Parse(r io.Reader, source string) (*Config, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxConfigSize+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	if len(data) > maxConfigSize {
		return nil, fmt.Errorf("%s: larger than %d MiB: not a kube-proxy configuration", source, maxConfigSize>>20)
	}
	if bytes.IndexByte(data, 0) >= 0 {
		return nil, fmt.Errorf("%s: %w", source, scan.ErrBinary)
	}
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("%s: empty input", source)
	}
	obj, err := decodeObject(data)
	if err != nil {
		return nil, fmt.Errorf("%s: not YAML or JSON: %w", source, err)
	}
	cfg := &Config{Source: source}
	if err := cfg.fromObject(obj, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return cfg, nil
}

// decodeObject reads one YAML or JSON document into generic values, with
// numbers kept as json.Number.
func decodeObject(data []byte) (map[string]any, error) {
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("expected an object, found %s", jsonKind(v))
	}
	return m, nil
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "nothing (null)"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return fmt.Sprintf("%T", v)
}

const configExpected = "expected kube-proxy's /configz output, a KubeProxyConfiguration (kubeproxy.config.k8s.io/v1alpha1) or the kube-proxy ConfigMap (data key config.conf)"

func (c *Config) fromObject(obj map[string]any, depth int) error {
	if depth > 3 {
		return fmt.Errorf("configuration nested too deeply")
	}
	if inner, ok := obj[proxyConfigGroup]; ok {
		m, ok := inner.(map[string]any)
		if !ok {
			return fmt.Errorf("/configz: %q is %s, not an object", proxyConfigGroup, jsonKind(inner))
		}
		if isInternalConfig(m) {
			c.Format = "configz-internal"
			return c.fromInternal(m)
		}
		c.Format = "configz"
		return c.fromV1Alpha1(m, true)
	}
	kind, _ := obj["kind"].(string)
	apiVersion, _ := obj["apiVersion"].(string)
	switch {
	case kind == "ConfigMap":
		return c.fromConfigMap(obj, depth)
	case kind == "List" || strings.HasSuffix(kind, "List") && obj["items"] != nil:
		return c.fromList(obj, depth)
	case kind == "KubeProxyConfiguration":
		group, version, _ := strings.Cut(apiVersion, "/")
		if group != proxyConfigGroup {
			return fmt.Errorf("KubeProxyConfiguration with apiVersion %q: %s", apiVersion, configExpected)
		}
		if version != "v1alpha1" {
			return fmt.Errorf("unsupported apiVersion %q: kube-proxy reads only %s/v1alpha1", apiVersion, proxyConfigGroup)
		}
		if c.Format == "" {
			c.Format = "KubeProxyConfiguration"
		}
		return c.fromV1Alpha1(obj, false)
	case kind != "":
		return fmt.Errorf("a %s object (apiVersion %q): %s", kind, apiVersion, configExpected)
	case isInternalConfig(obj):
		// the inner object of an old /configz, cut out with jq
		c.Format = "configz-internal"
		return c.fromInternal(obj)
	case looksLikeV1Alpha1(obj):
		return fmt.Errorf("a kube-proxy configuration without apiVersion and kind: kube-proxy would reject it; add apiVersion: %s/v1alpha1 and kind: KubeProxyConfiguration", proxyConfigGroup)
	}
	return fmt.Errorf("unrecognised object: %s", configExpected)
}

// isInternalConfig recognises the internal KubeProxyConfiguration type,
// which has no JSON tags: Go's field names.
func isInternalConfig(m map[string]any) bool {
	n := 0
	for _, k := range []string{"IPTables", "NFTables", "Mode", "SyncPeriod", "MetricsBindAddress", "NodePortAddresses", "DetectLocalMode", "BindAddress", "Linux"} {
		if _, ok := m[k]; ok {
			n++
		}
	}
	return n >= 2
}

func looksLikeV1Alpha1(m map[string]any) bool {
	for _, k := range []string{"iptables", "nftables", "mode", "clusterCIDR", "metricsBindAddress", "nodePortAddresses", "conntrack"} {
		if _, ok := m[k]; ok {
			return true
		}
	}
	return false
}

func (c *Config) fromConfigMap(obj map[string]any, depth int) error {
	meta, _ := obj["metadata"].(map[string]any)
	name, _ := meta["name"].(string)
	data, _ := obj["data"].(map[string]any)
	if data == nil {
		return fmt.Errorf("ConfigMap %q has no data: %s", name, configExpected)
	}
	key := "config.conf"
	text, ok := data[key].(string)
	if !ok {
		// Not kubeadm's layout: take the one data value that holds a
		// KubeProxyConfiguration.
		var keys []string
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if s, isStr := data[k].(string); isStr && strings.Contains(s, "KubeProxyConfiguration") {
				key, text, ok = k, s, true
				c.Warnings = append(c.Warnings, fmt.Sprintf("ConfigMap %q has no config.conf key; read the configuration from key %q", name, k))
				break
			}
		}
		if !ok {
			return fmt.Errorf("ConfigMap %q has no config.conf key (keys: %s) and no other key holds a KubeProxyConfiguration", name, strings.Join(keys, ", "))
		}
	}
	inner, err := decodeObject([]byte(text))
	if err != nil {
		return fmt.Errorf("ConfigMap %q, key %s: not YAML or JSON: %w", name, key, err)
	}
	if inner["kind"] != "KubeProxyConfiguration" {
		k, _ := inner["kind"].(string)
		return fmt.Errorf("ConfigMap %q, key %s: kind %q, not KubeProxyConfiguration", name, key, k)
	}
	c.Format = "ConfigMap"
	c.ConfigMapKey = key
	if name != "" && name != "kube-proxy" {
		c.Warnings = append(c.Warnings, fmt.Sprintf("ConfigMap is named %q, not kube-proxy", name))
	}
	return c.fromObject(inner, depth+1)
}

func (c *Config) fromList(obj map[string]any, depth int) error {
	items, _ := obj["items"].([]any)
	var cms []map[string]any
	for _, it := range items {
		m, ok := it.(map[string]any)
		if !ok || m["kind"] != "ConfigMap" {
			continue
		}
		data, _ := m["data"].(map[string]any)
		if _, ok := data["config.conf"]; !ok {
			continue
		}
		meta, _ := m["metadata"].(map[string]any)
		if meta["name"] == "kube-proxy" {
			return c.fromConfigMap(m, depth+1)
		}
		cms = append(cms, m)
	}
	switch len(cms) {
	case 0:
		return fmt.Errorf("a list of %d objects without a kube-proxy ConfigMap: %s", len(items), configExpected)
	case 1:
		return c.fromConfigMap(cms[0], depth+1)
	}
	return fmt.Errorf("a list with %d ConfigMaps holding config.conf and none named kube-proxy: pass the one to use", len(cms))
}

// cfgGetter reads typed values at exact (case-sensitive) paths.
type cfgGetter struct {
	m    map[string]any
	errs []string
}

func (g *cfgGetter) lookup(path ...string) (any, bool) {
	var cur any = g.m
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[p]
		if !ok {
			return nil, false
		}
	}
	if cur == nil {
		return nil, false
	}
	return cur, true
}

func (g *cfgGetter) bad(path []string, v any, want string) {
	g.errs = append(g.errs, fmt.Sprintf("%s is %s, not %s", strings.Join(path, "."), jsonKind(v), want))
}

func (g *cfgGetter) str(path ...string) (string, bool) {
	v, ok := g.lookup(path...)
	if !ok {
		return "", false
	}
	s, ok := v.(string)
	if !ok {
		g.bad(path, v, "a string")
		return "", false
	}
	return s, true
}

func (g *cfgGetter) boolean(path ...string) (bool, bool) {
	v, ok := g.lookup(path...)
	if !ok {
		return false, false
	}
	b, ok := v.(bool)
	if !ok {
		g.bad(path, v, "a boolean")
		return false, false
	}
	return b, true
}

func (g *cfgGetter) int32(path ...string) (*int32, bool) {
	v, ok := g.lookup(path...)
	if !ok {
		return nil, false
	}
	n, ok := v.(json.Number)
	if !ok {
		g.bad(path, v, "a number")
		return nil, false
	}
	i, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		g.bad(path, v, "a 32-bit integer")
		return nil, false
	}
	x := int32(i)
	return &x, true
}

// duration reads a metav1.Duration ("30s"); the internal type's JSON also
// writes it as a string. A bare number is nanoseconds.
func (g *cfgGetter) duration(path ...string) (time.Duration, bool) {
	v, ok := g.lookup(path...)
	if !ok {
		return 0, false
	}
	switch x := v.(type) {
	case string:
		d, err := time.ParseDuration(x)
		if err != nil {
			g.bad(path, v, "a duration like 30s")
			return 0, false
		}
		return d, true
	case json.Number:
		n, err := strconv.ParseInt(string(x), 10, 64)
		if err != nil {
			g.bad(path, v, "a duration")
			return 0, false
		}
		return time.Duration(n), true
	}
	g.bad(path, v, "a duration")
	return 0, false
}

func (g *cfgGetter) strings(path ...string) ([]string, bool) {
	v, ok := g.lookup(path...)
	if !ok {
		return nil, false
	}
	l, ok := v.([]any)
	if !ok {
		g.bad(path, v, "a list")
		return nil, false
	}
	out := make([]string, 0, len(l))
	for _, e := range l {
		s, ok := e.(string)
		if !ok {
			g.bad(path, e, "a string")
			continue
		}
		out = append(out, s)
	}
	return out, true
}

func (g *cfgGetter) boolMap(path ...string) map[string]bool {
	v, ok := g.lookup(path...)
	if !ok {
		return nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		g.bad(path, v, "an object")
		return nil
	}
	out := make(map[string]bool, len(m))
	for k, e := range m {
		if b, ok := e.(bool); ok {
			out[k] = b
		}
	}
	return out
}

// rawConfig is a configuration read from either shape, before defaulting:
// nil / zero means absent.
type rawConfig struct {
	mode                          string
	iptBit, nftBit                *int32
	iptMasqAll, nftMasqAll        bool
	masqAll                       *bool // internal type: one value for every mode
	iptSync, iptMinSync           time.Duration
	nftSync, nftMinSync           time.Duration
	ipvsSync, ipvsMinSync         time.Duration
	sync, minSync                 time.Duration // internal type
	configSync                    time.Duration
	clusterCIDR                   string
	detectLocalMode               string
	localhostNodePorts            *bool
	nodePortAddresses             []string
	ipvsScheduler                 string
	bindAddress, metricsBind      string
	healthzBind, hostnameOverride string
	tcpBeLiberal                  bool
	conntrack                     rawConntrack
	featureGates                  map[string]bool
	internal                      bool
}

func (c *Config) fromV1Alpha1(m map[string]any, configz bool) error {
	g := &cfgGetter{m: m}
	var raw rawConfig
	if av, ok := g.str("apiVersion"); ok {
		c.APIVersion = av
		if group, version, _ := strings.Cut(av, "/"); group != proxyConfigGroup || version != "v1alpha1" {
			if configz {
				c.Warnings = append(c.Warnings, fmt.Sprintf("/configz reports apiVersion %q; read as v1alpha1", av))
			}
		}
	}
	raw.mode, _ = g.str("mode")
	raw.iptBit, _ = g.int32("iptables", "masqueradeBit")
	raw.nftBit, _ = g.int32("nftables", "masqueradeBit")
	raw.iptMasqAll, _ = g.boolean("iptables", "masqueradeAll")
	raw.nftMasqAll, _ = g.boolean("nftables", "masqueradeAll")
	raw.iptSync, _ = g.duration("iptables", "syncPeriod")
	raw.iptMinSync, _ = g.duration("iptables", "minSyncPeriod")
	raw.nftSync, _ = g.duration("nftables", "syncPeriod")
	raw.nftMinSync, _ = g.duration("nftables", "minSyncPeriod")
	raw.ipvsSync, _ = g.duration("ipvs", "syncPeriod")
	raw.ipvsMinSync, _ = g.duration("ipvs", "minSyncPeriod")
	raw.configSync, _ = g.duration("configSyncPeriod")
	raw.clusterCIDR, _ = g.str("clusterCIDR")
	raw.detectLocalMode, _ = g.str("detectLocalMode")
	if b, ok := g.boolean("iptables", "localhostNodePorts"); ok {
		raw.localhostNodePorts = &b
	}
	raw.nodePortAddresses, _ = g.strings("nodePortAddresses")
	raw.ipvsScheduler, _ = g.str("ipvs", "scheduler")
	raw.bindAddress, _ = g.str("bindAddress")
	raw.metricsBind, _ = g.str("metricsBindAddress")
	raw.healthzBind, _ = g.str("healthzBindAddress")
	raw.hostnameOverride, _ = g.str("hostnameOverride")
	raw.tcpBeLiberal, _ = g.boolean("conntrack", "tcpBeLiberal")
	raw.conntrack = g.readConntrack(false, "conntrack")
	raw.featureGates = g.boolMap("featureGates")
	if len(g.errs) > 0 {
		return fmt.Errorf("bad KubeProxyConfiguration: %s", strings.Join(g.errs, "; "))
	}
	c.apply(raw)
	return nil
}

// fromInternal reads the internal type's JSON (Go field names). Older
// internal types (≤ 1.30) kept masqueradeAll, syncPeriod and conntrack in
// other places; both layouts are read.
func (c *Config) fromInternal(m map[string]any) error {
	g := &cfgGetter{m: m}
	raw := rawConfig{internal: true}
	raw.mode, _ = g.str("Mode")
	raw.iptBit, _ = g.int32("IPTables", "MasqueradeBit")
	raw.nftBit, _ = g.int32("NFTables", "MasqueradeBit")
	if b, ok := g.boolean("Linux", "MasqueradeAll"); ok {
		raw.masqAll = &b
	} else if b, ok := g.boolean("IPTables", "MasqueradeAll"); ok {
		raw.masqAll = &b
	}
	if d, ok := g.duration("SyncPeriod"); ok {
		raw.sync = d
	} else {
		raw.sync, _ = g.duration("IPTables", "SyncPeriod")
	}
	if d, ok := g.duration("MinSyncPeriod"); ok {
		raw.minSync = d
	} else {
		raw.minSync, _ = g.duration("IPTables", "MinSyncPeriod")
	}
	raw.configSync, _ = g.duration("ConfigSyncPeriod")
	if cidrs, ok := g.strings("DetectLocal", "ClusterCIDRs"); ok && len(cidrs) > 0 {
		raw.clusterCIDR = strings.Join(cidrs, ",")
	} else {
		raw.clusterCIDR, _ = g.str("ClusterCIDR")
	}
	raw.detectLocalMode, _ = g.str("DetectLocalMode")
	if b, ok := g.boolean("IPTables", "LocalhostNodePorts"); ok {
		raw.localhostNodePorts = &b
	}
	raw.nodePortAddresses, _ = g.strings("NodePortAddresses")
	raw.ipvsScheduler, _ = g.str("IPVS", "Scheduler")
	raw.bindAddress, _ = g.str("BindAddress")
	raw.metricsBind, _ = g.str("MetricsBindAddress")
	raw.healthzBind, _ = g.str("HealthzBindAddress")
	raw.hostnameOverride, _ = g.str("HostnameOverride")
	if _, ok := g.lookup("Linux", "Conntrack"); ok {
		raw.tcpBeLiberal, _ = g.boolean("Linux", "Conntrack", "TCPBeLiberal")
		raw.conntrack = g.readConntrack(true, "Linux", "Conntrack")
	} else {
		raw.tcpBeLiberal, _ = g.boolean("Conntrack", "TCPBeLiberal")
		raw.conntrack = g.readConntrack(true, "Conntrack")
	}
	raw.featureGates = g.boolMap("FeatureGates")
	if len(g.errs) > 0 {
		return fmt.Errorf("bad /configz: %s", strings.Join(g.errs, "; "))
	}
	c.apply(raw)
	return nil
}
