package kpconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// kubeadmConfigConf is config.conf as kubeadm writes it into the
// kube-system/kube-proxy ConfigMap: every field present, most null or zero.
const kubeadmConfigConf = `apiVersion: kubeproxy.config.k8s.io/v1alpha1
bindAddress: 0.0.0.0
bindAddressHardFail: false
clientConnection:
  acceptContentTypes: ""
  burst: 0
  contentType: ""
  kubeconfig: /var/lib/kube-proxy/kubeconfig.conf
  qps: 0
clusterCIDR: 10.244.0.0/16,fd00:10:244::/56
configSyncPeriod: 0s
conntrack:
  maxPerCore: null
  min: null
  tcpBeLiberal: false
  tcpCloseWaitTimeout: null
  tcpEstablishedTimeout: null
  udpStreamTimeout: 0s
  udpTimeout: 0s
detectLocal:
  bridgeInterface: ""
  interfaceNamePrefix: ""
detectLocalMode: ""
enableProfiling: false
healthzBindAddress: ""
hostnameOverride: ""
iptables:
  localhostNodePorts: null
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
ipvs:
  excludeCIDRs: null
  minSyncPeriod: 0s
  scheduler: ""
  strictARP: false
  syncPeriod: 0s
  tcpFinTimeout: 0s
  tcpTimeout: 0s
  udpTimeout: 0s
kind: KubeProxyConfiguration
logging:
  flushFrequency: 0
  options:
    json:
      infoBufferSize: "0"
    text:
      infoBufferSize: "0"
  verbosity: 0
metricsBindAddress: ""
mode: iptables
nftables:
  masqueradeAll: false
  masqueradeBit: null
  minSyncPeriod: 0s
  syncPeriod: 0s
nodePortAddresses: null
oomScoreAdj: null
portRange: ""
showHiddenMetricsForVersion: ""
winkernel:
  enableDSR: false
  forwardHealthCheckVip: false
  networkName: ""
  rootHnsEndpointName: ""
  sourceVip: ""
`

func indent(s, by string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i := range lines {
		lines[i] = by + lines[i]
	}
	return strings.Join(lines, "\n") + "\n"
}

func kubeadmConfigMapYAML(conf string) string {
	return "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\n  namespace: kube-system\n  labels:\n    app: kube-proxy\ndata:\n  config.conf: |-\n" + indent(conf, "    ") +
		"  kubeconfig.conf: |-\n    apiVersion: v1\n    kind: Config\n"
}

func listOfConfigMaps(conf string) string {
	cm := indent(kubeadmConfigMapYAML(conf), "  ")
	return "apiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: ConfigMap\n  metadata:\n    name: coredns\n  data:\n    Corefile: x\n- " + cm[2:]
}

func kubeadmConfigMapJSON(t *testing.T, conf string) string {
	b, err := json.MarshalIndent(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]any{"name": "kube-proxy", "namespace": "kube-system"},
		"data":     map[string]string{"config.conf": conf, "kubeconfig.conf": "apiVersion: v1\nkind: Config\n"},
	}, "", "    ")
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// configz137 is /configz of kube-proxy 1.37 (the v1alpha1 type, converted
// from the internal one, defaults applied; syncPeriod only in the mode's
// section).
const configz137 = `{"kubeproxy.config.k8s.io":{"kind":"KubeProxyConfiguration","apiVersion":"kubeproxy.config.k8s.io/v1alpha1","clientConnection":{"kubeconfig":"/var/lib/kube-proxy/kubeconfig.conf","acceptContentTypes":"","contentType":"application/vnd.kubernetes.protobuf","qps":5,"burst":10},"logging":{"format":"text","flushFrequency":"5s","verbosity":0,"options":{"text":{"infoBufferSize":"0"},"json":{"infoBufferSize":"0"}}},"hostnameOverride":"node-a","bindAddress":"0.0.0.0","healthzBindAddress":"0.0.0.0:10256","metricsBindAddress":"0.0.0.0:10249","bindAddressHardFail":false,"enableProfiling":false,"showHiddenMetricsForVersion":"","mode":"nftables","iptables":{"masqueradeBit":14,"masqueradeAll":false,"localhostNodePorts":true,"syncPeriod":"0s","minSyncPeriod":"0s"},"ipvs":{"syncPeriod":"0s","minSyncPeriod":"0s","scheduler":"","excludeCIDRs":null,"strictARP":false,"tcpTimeout":"0s","tcpFinTimeout":"0s","udpTimeout":"0s"},"nftables":{"masqueradeBit":15,"masqueradeAll":true,"syncPeriod":"45s","minSyncPeriod":"2s"},"winkernel":{"networkName":"","sourceVip":"","enableDSR":false,"rootHnsEndpointName":"","forwardHealthCheckVip":false},"detectLocalMode":"ClusterCIDR","detectLocal":{"bridgeInterface":"","interfaceNamePrefix":""},"clusterCIDR":"10.244.0.0/16","nodePortAddresses":["primary"],"oomScoreAdj":-999,"conntrack":{"maxPerCore":32768,"min":131072,"tcpEstablishedTimeout":"24h0m0s","tcpCloseWaitTimeout":"1h0m0s","tcpBeLiberal":false,"udpTimeout":"0s","udpStreamTimeout":"0s"},"configSyncPeriod":"15m0s","portRange":""}}`

// configzInternal is /configz of kube-proxy ≤ 1.36: the internal type,
// Go field names, defaults applied.
const configzInternal = `{"kubeproxy.config.k8s.io":{"Linux":{"Conntrack":{"MaxPerCore":32768,"Min":131072,"TCPEstablishedTimeout":"24h0m0s","TCPCloseWaitTimeout":"1h0m0s","TCPBeLiberal":true,"UDPTimeout":"0s","UDPStreamTimeout":"0s"},"MasqueradeAll":true,"OOMScoreAdj":-999},"Windows":{"RunAsService":false},"FeatureGates":{"NFTablesProxyMode":true},"ClientConnection":{"Kubeconfig":"/var/lib/kube-proxy/kubeconfig.conf","AcceptContentTypes":"","ContentType":"application/vnd.kubernetes.protobuf","QPS":5,"Burst":10},"Logging":{"format":"text","flushFrequency":"5s","verbosity":2,"options":{"text":{"infoBufferSize":"0"},"json":{"infoBufferSize":"0"}}},"HostnameOverride":"","BindAddress":"0.0.0.0","HealthzBindAddress":"0.0.0.0:10256","MetricsBindAddress":"127.0.0.1:10249","BindAddressHardFail":false,"EnableProfiling":false,"ShowHiddenMetricsForVersion":"","Mode":"iptables","IPTables":{"MasqueradeBit":15,"LocalhostNodePorts":true},"IPVS":{"Scheduler":"","ExcludeCIDRs":null,"StrictARP":false,"TCPTimeout":"0s","TCPFinTimeout":"0s","UDPTimeout":"0s"},"Winkernel":{"NetworkName":"","SourceVip":"","EnableDSR":false,"RootHnsEndpointName":"","ForwardHealthCheckVip":false},"NFTables":{"MasqueradeBit":14},"DetectLocalMode":"ClusterCIDR","DetectLocal":{"BridgeInterface":"","ClusterCIDRs":["10.244.0.0/16","fd00:10:244::/56"],"InterfaceNamePrefix":""},"NodePortAddresses":["10.0.0.0/8"],"SyncPeriod":"1m0s","MinSyncPeriod":"1s","ConfigSyncPeriod":"15m0s"}}`

func TestParseProxyConfig(t *testing.T) {
	type want struct {
		format, mode       string
		bit, ipt, nft      int32
		sync, minSync      time.Duration
		masqAll, lnp, lnpE bool
		clusterCIDR        string
		metrics            string
		npa                []string
		defaulted          []string // substrings of kubeproxy.Defaulted entries
		notDefaulted       []string
	}
	for _, c := range []struct {
		name, input string
		want        want
	}{
		{"kubeadm ConfigMap YAML", kubeadmConfigMapYAML(kubeadmConfigConf), want{
			format: "ConfigMap", mode: "iptables", bit: 14, ipt: 14, nft: 14, sync: 30 * time.Second, minSync: time.Second,
			lnp: true, lnpE: true, clusterCIDR: "10.244.0.0/16,fd00:10:244::/56", metrics: "127.0.0.1:10249",
			defaulted:    []string{"iptables.masqueradeBit: 14", "nftables.masqueradeBit: 14", "iptables.syncPeriod: 30s", "iptables.minSyncPeriod: 1s", "iptables.localhostNodePorts: true", "metricsBindAddress: 127.0.0.1:10249", "configSyncPeriod: 15m0s", "detectLocalMode: ClusterCIDR"},
			notDefaulted: []string{"mode", "nodePortAddresses", "bindAddress"},
		}},
		{"kubeadm ConfigMap JSON", "", want{
			format: "ConfigMap", mode: "iptables", bit: 14, ipt: 14, nft: 14, sync: 30 * time.Second, minSync: time.Second,
			lnp: true, lnpE: true, clusterCIDR: "10.244.0.0/16,fd00:10:244::/56", metrics: "127.0.0.1:10249",
		}},
		{"ConfigMap in a List", listOfConfigMaps(strings.Replace(kubeadmConfigConf, "mode: iptables", "mode: nftables", 1)), want{
			format: "ConfigMap", mode: "nftables", bit: 14, ipt: 14, nft: 14, sync: 30 * time.Second, minSync: time.Second,
			lnp: true, lnpE: false, clusterCIDR: "10.244.0.0/16,fd00:10:244::/56", metrics: "127.0.0.1:10249", npa: []string{"primary"},
			defaulted: []string{"nftables.syncPeriod: 30s", `nodePortAddresses: ["primary"]`},
		}},
		{"KubeProxyConfiguration, mode defaulted", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nbindAddress: \"::\"\niptables:\n  masqueradeBit: 15\n  syncPeriod: 10s\nnodePortAddresses: [127.0.0.0/8]\nmetricsBindAddress: 0.0.0.0\n", want{
			format: "KubeProxyConfiguration", mode: "iptables", bit: 15, ipt: 15, nft: 14, sync: 10 * time.Second, minSync: time.Second,
			lnp: true, lnpE: true, metrics: "0.0.0.0:10249", npa: []string{"127.0.0.0/8"},
			defaulted:    []string{`mode: "" → iptables`, "nftables.masqueradeBit: 14"},
			notDefaulted: []string{"iptables.masqueradeBit", "iptables.syncPeriod", "metricsBindAddress"},
		}},
		{"KubeProxyConfiguration JSON, ipvs", `{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","mode":"ipvs","iptables":{"masqueradeBit":13,"masqueradeAll":true},"ipvs":{"syncPeriod":"20s"},"nodePortAddresses":["10.0.0.0/8"],"bindAddress":"fd00::10"}`, want{
			format: "KubeProxyConfiguration", mode: "ipvs", bit: 13, ipt: 13, nft: 14, sync: 20 * time.Second, minSync: 0,
			masqAll: true, lnp: true, lnpE: false, metrics: "[::1]:10249", npa: []string{"10.0.0.0/8"},
		}},
		{"configz 1.37", configz137, want{
			format: "configz", mode: "nftables", bit: 15, ipt: 14, nft: 15, sync: 45 * time.Second, minSync: 2 * time.Second,
			masqAll: true, lnp: true, lnpE: false, clusterCIDR: "10.244.0.0/16", metrics: "0.0.0.0:10249", npa: []string{"primary"},
			notDefaulted: []string{"masqueradeBit", "syncPeriod", "mode", "nodePortAddresses"},
		}},
		{"configz internal (≤ 1.36)", configzInternal, want{
			format: "configz-internal", mode: "iptables", bit: 15, ipt: 15, nft: 14, sync: time.Minute, minSync: time.Second,
			masqAll: true, lnp: true, lnpE: false, clusterCIDR: "10.244.0.0/16,fd00:10:244::/56", metrics: "127.0.0.1:10249", npa: []string{"10.0.0.0/8"},
			notDefaulted: []string{"MasqueradeBit", "SyncPeriod", "Mode"},
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			input := c.input
			if c.name == "kubeadm ConfigMap JSON" {
				input = kubeadmConfigMapJSON(t, kubeadmConfigConf)
			}
			cfg, err := Parse(strings.NewReader(input), "in")
			if err != nil {
				t.Fatal(err)
			}
			w := c.want
			if cfg.Format != w.format || string(cfg.Mode) != w.mode || cfg.Source != "in" {
				t.Errorf("format %q mode %q, want %q %q", cfg.Format, cfg.Mode, w.format, w.mode)
			}
			if cfg.MasqueradeBit == nil || *cfg.MasqueradeBit != w.bit || *cfg.IPTablesMasqueradeBit != w.ipt || *cfg.NFTablesMasqueradeBit != w.nft {
				t.Errorf("bits %v %v %v, want %d %d %d", cfg.MasqueradeBit, cfg.IPTablesMasqueradeBit, cfg.NFTablesMasqueradeBit, w.bit, w.ipt, w.nft)
			} else if cfg.MasqueradeBit == cfg.IPTablesMasqueradeBit && cfg.Mode == "nftables" {
				t.Errorf("nftables mode uses the iptables bit")
			}
			if cfg.SyncPeriod != w.sync || cfg.MinSyncPeriod != w.minSync {
				t.Errorf("sync %v/%v, want %v/%v", cfg.SyncPeriod, cfg.MinSyncPeriod, w.sync, w.minSync)
			}
			if cfg.MasqueradeAll != w.masqAll || cfg.LocalhostNodePorts == nil || *cfg.LocalhostNodePorts != w.lnp || cfg.LocalhostNodePortsEffective != w.lnpE {
				t.Errorf("masqueradeAll %v localhostNodePorts %v effective %v", cfg.MasqueradeAll, cfg.LocalhostNodePorts, cfg.LocalhostNodePortsEffective)
			}
			if cfg.ClusterCIDR != w.clusterCIDR || cfg.MetricsBindAddress != w.metrics || strings.Join(cfg.NodePortAddresses, ",") != strings.Join(w.npa, ",") {
				t.Errorf("clusterCIDR %q metrics %q npa %q", cfg.ClusterCIDR, cfg.MetricsBindAddress, cfg.NodePortAddresses)
			}
			all := strings.Join(cfg.Defaulted, "\n")
			for _, d := range w.defaulted {
				if !strings.Contains(all, d) {
					t.Errorf("kubeproxy.Defaulted lacks %q:\n%s", d, all)
				}
			}
			for _, d := range w.notDefaulted {
				for _, e := range cfg.Defaulted {
					if strings.HasPrefix(e, d+":") || strings.HasPrefix(e, "iptables."+d+":") || strings.HasPrefix(e, "nftables."+d+":") || strings.HasPrefix(e, "IPTables."+d+":") {
						t.Errorf("%q defaulted: %s", d, e)
					}
				}
			}
			if cfg.ModeDefaulted != strings.Contains(all, "mode:") {
				t.Errorf("ModeDefaulted %v, kubeproxy.Defaulted %q", cfg.ModeDefaulted, cfg.Defaulted)
			}
			if len(cfg.Warnings) != 0 {
				t.Errorf("warnings %q", cfg.Warnings)
			}
			b, err := json.Marshal(cfg)
			if err != nil {
				t.Fatal(err)
			}
			var back map[string]any
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatal(err)
			}
			if back["syncPeriod"] != w.sync.String() || back["masqueradeBit"] != float64(w.bit) || back["mode"] != w.mode {
				t.Errorf("JSON %s", b)
			}
		})
	}
}

func TestParseProxyConfigErrors(t *testing.T) {
	for _, c := range []struct{ name, input, msg string }{
		{"empty", "  \n", "empty"},
		{"binary", "\x00\x01", "binary"},
		{"garbage", "{{{", "not YAML or JSON"},
		{"a list", "[1, 2]", "expected an object"},
		{"a Service", "apiVersion: v1\nkind: Service\nmetadata:\n  name: x\n", "a Service object"},
		{"other JSON", `{"foo": 1}`, "unrecognised"},
		{"kubelet config", "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n", "KubeletConfiguration"},
		{"unknown version", "apiVersion: kubeproxy.config.k8s.io/v1beta9\nkind: KubeProxyConfiguration\n", "unsupported apiVersion"},
		{"wrong group", "apiVersion: example.com/v1\nkind: KubeProxyConfiguration\n", "apiVersion"},
		{"no kind", "mode: iptables\niptables:\n  masqueradeBit: 14\n", "without apiVersion and kind"},
		{"ConfigMap without config", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\ndata:\n  kubeconfig.conf: x\n", "no config.conf key"},
		{"ConfigMap without data", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\n", "no data"},
		{"ConfigMap with a broken config", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\ndata:\n  config.conf: \"{{{\"\n", "not YAML or JSON"},
		{"ConfigMap with another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\ndata:\n  config.conf: \"kind: Foo\"\n", "not KubeProxyConfiguration"},
		{"List without kube-proxy", "apiVersion: v1\nkind: List\nitems:\n- kind: Pod\n", "without a kube-proxy ConfigMap"},
		{"bad bit type", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\niptables:\n  masqueradeBit: fourteen\n", "iptables.masqueradeBit is a string"},
		{"bad duration", "apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\niptables:\n  syncPeriod: soon\n", "iptables.syncPeriod"},
		{"configz not an object", `{"kubeproxy.config.k8s.io": 3}`, "not an object"},
		{"nested ConfigMaps", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\ndata:\n  config.conf: |\n    apiVersion: v1\n    kind: ConfigMap\n", "not KubeProxyConfiguration"},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg, err := Parse(strings.NewReader(c.input), "in")
			if err == nil {
				t.Fatalf("no error: %+v", cfg)
			}
			if !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "in: ") {
				t.Errorf("error %q lacks %q", err, c.msg)
			}
		})
	}
}

func TestParseProxyConfigWarnings(t *testing.T) {
	cfg, err := Parse(strings.NewReader("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: userspace\niptables:\n  masqueradeBit: 40\n"), "in")
	if err != nil {
		t.Fatal(err)
	}
	w := strings.Join(cfg.Warnings, "\n")
	if !strings.Contains(w, "outside [0, 31]") || !strings.Contains(w, `unknown mode "userspace"`) {
		t.Errorf("warnings %q", cfg.Warnings)
	}
	// A ConfigMap keyed differently (not kubeadm's layout) is read, with a
	// warning.
	cfg, err = Parse(strings.NewReader("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy-config\ndata:\n  config: |\n    apiVersion: kubeproxy.config.k8s.io/v1alpha1\n    kind: KubeProxyConfiguration\n    mode: nftables\n"), "in")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.ConfigMapKey != "config" || cfg.Mode != "nftables" || len(cfg.Warnings) != 2 {
		t.Errorf("%+v", cfg)
	}
}

func TestNodePortAddressesLoopback(t *testing.T) {
	for _, c := range []struct {
		addrs []string
		want  bool
	}{
		{nil, true},
		{[]string{"0.0.0.0/0"}, true},
		{[]string{"127.0.0.0/8"}, true},
		{[]string{"127.0.0.1/32", "10.0.0.0/8"}, true},
		{[]string{"10.0.0.0/8"}, false},
		{[]string{"fd00::/64"}, true}, // no IPv4 CIDR: 0.0.0.0/0 for IPv4
		{[]string{"primary"}, false},
		{[]string{"localhost"}, true},
		{[]string{"all"}, true},
	} {
		if got := nodePortAddressesContainIPv4Loopback(c.addrs); got != c.want {
			t.Errorf("%q: %v, want %v", c.addrs, got, c.want)
		}
	}
}

// TestParseProxyConfigFixtures reads the configz.json files the fixture
// generator writes, when they exist: the bit must be the one meta.json
// says and the rules show.
func TestParseProxyConfigFixtures(t *testing.T) {
	n := 0
	for _, dir := range fixture.Dirs(t) {
		matches, _ := filepath.Glob(filepath.Join(dir, "*configz*.json"))
		for _, path := range matches {
			n++
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := Parse(f, path)
			f.Close()
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			meta := fixture.ReadMeta(t, dir)
			if cfg.MasqueradeBit == nil || int(*cfg.MasqueradeBit) != meta.MasqueradeBit {
				t.Errorf("%s: masqueradeBit %v, meta says %d", path, cfg.MasqueradeBit, meta.MasqueradeBit)
			}
			if !strings.HasPrefix(cfg.Format, "configz") || len(cfg.Warnings) != 0 {
				t.Errorf("%s: format %s warnings %q", path, cfg.Format, cfg.Warnings)
			}
		}
	}
	// kubeadm's ConfigMap, defaulted here, says what kube-proxy's own
	// defaulting put in /configz.
	for _, dir := range fixture.Dirs(t) {
		cms, _ := filepath.Glob(filepath.Join(dir, "kube-proxy-configmap-*.yaml"))
		for _, path := range cms {
			n++
			mode := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(path), "kube-proxy-configmap-"), ".yaml")
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			cm, err := Parse(f, path)
			f.Close()
			if err != nil {
				t.Errorf("%s: %v", path, err)
				continue
			}
			if cm.Format != "ConfigMap" || cm.ConfigMapKey != "config.conf" || string(cm.Mode) != mode || len(cm.Defaulted) == 0 || len(cm.Warnings) != 0 {
				t.Errorf("%s: format %s key %s mode %s defaulted %q warnings %q", path, cm.Format, cm.ConfigMapKey, cm.Mode, cm.Defaulted, cm.Warnings)
			}
			zf, err := os.Open(filepath.Join(dir, "configz-"+mode+".json"))
			if err != nil {
				continue
			}
			cz, err := Parse(zf, "configz")
			zf.Close()
			if err != nil {
				t.Fatal(err)
			}
			a, b := *cm, *cz
			a.Source, a.Format, a.ConfigMapKey, a.Defaulted, a.ModeDefaulted = "", "", "", nil, false
			b.Source, b.Format, b.ConfigMapKey, b.Defaulted, b.ModeDefaulted = "", "", "", nil, false
			a.HostnameOverride, b.HostnameOverride = "", "" // kubeadm's DaemonSet passes --hostname-override
			if cz.Format == "configz-internal" {
				// Up to 1.36 /configz serves the internal type: no apiVersion,
				// and nftables' "primary" node-port addresses already resolved
				// to the node IPs.
				a.APIVersion = ""
				if len(a.NodePortAddresses) == 1 && a.NodePortAddresses[0] == "primary" {
					a.NodePortAddresses = b.NodePortAddresses
				}
			}
			ja, _ := json.Marshal(a)
			jb, _ := json.Marshal(b)
			if string(ja) != string(jb) {
				t.Errorf("%s: the ConfigMap defaulted here differs from kube-proxy's /configz:\n%s\n%s", path, ja, jb)
			}
		}
	}
	if n == 0 {
		t.Skip("no configz.json fixtures yet")
	}
}

func FuzzParseProxyConfig(f *testing.F) {
	f.Add(kubeadmConfigMapYAML(kubeadmConfigConf))
	f.Add(configz137)
	f.Add(configzInternal)
	f.Add("apiVersion: kubeproxy.config.k8s.io/v1alpha1\nkind: KubeProxyConfiguration\nmode: nftables\n")
	f.Add("apiVersion: v1\nkind: List\nitems:\n- kind: ConfigMap\n  data:\n    config.conf: 'kind: KubeProxyConfiguration'\n")
	f.Add(`{"kubeproxy.config.k8s.io":{"IPTables":{"MasqueradeBit":"x"},"Mode":1}}`)
	f.Add("a: &a [*a, *a]\n")
	f.Fuzz(func(t *testing.T, s string) {
		cfg, err := Parse(strings.NewReader(s), "fuzz")
		if err != nil {
			if cfg != nil {
				t.Fatal("config and error")
			}
			return
		}
		if cfg.Mode == "" || cfg.MasqueradeBit == nil || cfg.IPTablesMasqueradeBit == nil || cfg.NFTablesMasqueradeBit == nil ||
			cfg.LocalhostNodePorts == nil || cfg.SyncPeriod == 0 || cfg.Defaulted == nil || cfg.MetricsBindAddress == "" {
			t.Fatalf("incomplete config: %+v", cfg)
		}
		if _, err := json.Marshal(cfg); err != nil {
			t.Fatal(err)
		}
	})
}

// ipvs.scheduler, defaulted to rr as kube-proxy does (issue 32, item 3).
func TestIPVSScheduler(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","mode":"ipvs","ipvs":{"scheduler":"lc"}}`, "lc"},
		{`{"apiVersion":"kubeproxy.config.k8s.io/v1alpha1","kind":"KubeProxyConfiguration","mode":"ipvs","ipvs":{"scheduler":""}}`, "rr"},
		{configzInternal, "rr"},
		{strings.Replace(configzInternal, `"IPVS":{"Scheduler":""`, `"IPVS":{"Scheduler":"sh"`, 1), "sh"},
	} {
		c, err := Parse(strings.NewReader(tc.in), "x")
		if err != nil {
			t.Fatal(err)
		}
		if c.IPVSScheduler != tc.want {
			t.Errorf("%.60s: scheduler %q, want %q", tc.in, c.IPVSScheduler, tc.want)
		}
	}
}
