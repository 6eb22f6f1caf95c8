//go:build kpconfig

package main

// kube-proxy's configuration as a node shows it: the kube-system/kube-proxy
// ConfigMap as kubeadm writes it (config.conf + kubeconfig.conf) and the
// /configz endpoint of a kube-proxy that loaded that config.conf.
//
//   - The ConfigMap: kubeadm's KubeProxyConfiguration handling
//     (cmd/kubeadm/app/componentconfigs/kubeproxy.go Default, with the
//     scenario's settings as the user-supplied KubeProxyConfiguration
//     document), marshalled like kubeadm's configBase.Marshal (the YAML
//     serializer of a codec factory over a scheme that has only the external
//     kubeproxy.config.k8s.io/v1alpha1 types, so no defaulting: unset fields
//     stay zero/null), indented into kubeadm's KubeProxyConfigMap19 template
//     (cmd/kubeadm/app/phases/addons/proxy/manifests.go).
//   - /configz: config.conf decoded with kube-proxy's own scheme
//     (proxyconfigscheme.Codecs.UniversalDecoder(), as Options.loadConfig
//     does: v1alpha1 defaults, conversion to the internal type), then what
//     Options.Complete does on Linux (platformApplyDefaults,
//     --hostname-override from kubeadm's DaemonSet), then the version's own
//     configz registration (registerConfigz in version_v1*.go) served by
//     configz.InstallHandler.
//
// Built only with -tags kpconfig (hack/gen-fixtures.sh builds
// fixturegen-<v>-config): kube-proxy's config scheme pulls in apiserver and
// controller-manager packages whose init() registers metrics and feature
// gates, which would change what the proxier runs' /metrics show.

import (
	"bufio"
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"text/template"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/component-base/configz"
	kubeproxyv1alpha1 "k8s.io/kube-proxy/config/v1alpha1"
	proxyconfigapi "k8s.io/kubernetes/pkg/proxy/apis/config"
	proxyconfigscheme "k8s.io/kubernetes/pkg/proxy/apis/config/scheme"
)

func init() { configCmd = writeConfig }

// kubeadm's kube-proxy ConfigMap template (KubeProxyConfigMap19, identical in
// kubeadm v1.34.3 and v1.37.2), without its leading newline.
const kubeProxyConfigMap19 = `kind: ConfigMap
apiVersion: v1
metadata:
  name: {{ .ProxyConfigMap }}
  namespace: kube-system
  labels:
    app: kube-proxy
data:
  kubeconfig.conf: |-
    apiVersion: v1
    kind: Config
    clusters:
    - cluster:
        certificate-authority: /var/run/secrets/kubernetes.io/serviceaccount/ca.crt
        server: {{ .ControlPlaneEndpoint }}
      name: default
    contexts:
    - context:
        cluster: default
        namespace: default
        user: default
      name: default
    current-context: default
    users:
    - name: default
      user:
        tokenFile: /var/run/secrets/kubernetes.io/serviceaccount/token
  {{ .ProxyConfigMapKey }}: |-
{{ .ProxyConfig}}
`

// The control plane of the imaginary cluster: default/kubernetes's endpoint.
const controlPlaneEndpoint = "https://10.0.0.2:6443"

// kubeadmProxyConfig is the KubeProxyConfiguration kubeadm puts in the
// ConfigMap: the user-supplied document (the scenario's mode, and
// masqueradeBit when it is not the default) after kubeadm's Default().
func kubeadmProxyConfig(sc *Scenario, mode string) *kubeproxyv1alpha1.KubeProxyConfiguration {
	c := &kubeproxyv1alpha1.KubeProxyConfiguration{}
	// user-supplied (kubeadm init --config, KubeProxyConfiguration document)
	if mode != "iptables" {
		c.Mode = kubeproxyv1alpha1.ProxyMode(mode)
	}
	if sc.MasqueradeBit != 14 {
		bit := int32(sc.MasqueradeBit)
		c.IPTables.MasqueradeBit = &bit
		c.NFTables.MasqueradeBit = &bit
	}
	// kubeadm's Default() (ClusterConfiguration networking.podSubnet is the
	// dual-stack cluster CIDR; the API endpoint advertises an IPv4 address)
	if c.FeatureGates == nil {
		c.FeatureGates = map[string]bool{}
	}
	if c.BindAddress == "" {
		c.BindAddress = "0.0.0.0"
	}
	if c.ClusterCIDR == "" {
		c.ClusterCIDR = clusterCIDRv4 + "," + clusterCIDRv6
	}
	if c.ClientConnection.Kubeconfig == "" {
		c.ClientConnection.Kubeconfig = "/var/lib/kube-proxy/kubeconfig.conf"
	}
	if c.Mode == "" && kubeadmDefaultsMode {
		c.Mode = "iptables"
	}
	return c
}

// kubeadmMarshal is kubeadm's configBase.Marshal for the kube-proxy config.
func kubeadmMarshal(c *kubeproxyv1alpha1.KubeProxyConfiguration) ([]byte, error) {
	scheme := runtime.NewScheme()
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	if err := kubeproxyv1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	codecs := serializer.NewCodecFactory(scheme)
	info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), runtime.ContentTypeYAML)
	if !ok {
		return nil, fmt.Errorf("no YAML serializer")
	}
	return runtime.Encode(codecs.EncoderForVersion(info.Serializer, kubeproxyv1alpha1.SchemeGroupVersion), c)
}

func kubeadmConfigMap(configConf []byte) ([]byte, error) {
	var indented bytes.Buffer
	sc := bufio.NewScanner(bytes.NewReader(configConf))
	for sc.Scan() {
		fmt.Fprintf(&indented, "    %s\n", sc.Text())
	}
	t, err := template.New("cm").Parse(kubeProxyConfigMap19)
	if err != nil {
		return nil, err
	}
	var out bytes.Buffer
	err = t.Execute(&out, struct {
		ControlPlaneEndpoint, ProxyConfig, ProxyConfigMap, ProxyConfigMapKey string
	}{controlPlaneEndpoint, indented.String(), "kube-proxy", "config.conf"})
	return out.Bytes(), err
}

// loadProxyConfig is what kube-proxy does with --config=config.conf
// --hostname-override=$(NODE_NAME) before it builds the proxy server.
func loadProxyConfig(configConf []byte) (*proxyconfigapi.KubeProxyConfiguration, error) {
	obj, gvk, err := proxyconfigscheme.Codecs.UniversalDecoder().Decode(configConf, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decoding config.conf: %w", err)
	}
	cfg, ok := obj.(*proxyconfigapi.KubeProxyConfiguration)
	if !ok {
		return nil, fmt.Errorf("config.conf decoded to %v", gvk)
	}
	// platformApplyDefaults (cmd/kube-proxy/app/server_linux.go)
	if cfg.Mode == "" {
		cfg.Mode = proxyconfigapi.ProxyModeIPTables
	}
	if cfg.Mode == proxyconfigapi.ProxyModeNFTables && len(cfg.NodePortAddresses) == 0 {
		cfg.NodePortAddresses = []string{proxyconfigapi.NodePortAddressesPrimary}
	}
	if cfg.DetectLocalMode == "" {
		cfg.DetectLocalMode = proxyconfigapi.LocalModeClusterCIDR
	}
	// processHostnameOverrideFlag: kubeadm's DaemonSet passes
	// --hostname-override=$(NODE_NAME)
	cfg.HostnameOverride = strings.ToLower(nodeName)
	return cfg, nil
}

// serveConfigz answers GET /configz from configz.InstallHandler, as kube-proxy's
// metrics server does.
func serveConfigz() ([]byte, error) {
	mux := http.NewServeMux()
	configz.InstallHandler(mux)
	req := httptest.NewRequest(http.MethodGet, "/configz", nil)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return nil, fmt.Errorf("/configz returned %d: %s", rec.Code, rec.Body.String())
	}
	return rec.Body.Bytes(), nil
}

// writeConfig writes, per mode, kube-proxy-configmap-<mode>.yaml and
// configz-<mode>.json.
func writeConfig(sc *Scenario, out string) error {
	for _, mode := range sc.Modes {
		conf, err := kubeadmMarshal(kubeadmProxyConfig(sc, mode))
		if err != nil {
			return err
		}
		cm, err := kubeadmConfigMap(conf)
		if err != nil {
			return err
		}
		cfg, err := loadProxyConfig(conf)
		if err != nil {
			return err
		}
		if err := checkProxierConfig(sc, mode, cfg); err != nil {
			return fmt.Errorf("%s: the ConfigMap does not say what the proxier was given: %w", mode, err)
		}
		configz.Delete(proxyconfigapi.GroupName)
		if err := registerConfigz(cfg); err != nil {
			return err
		}
		body, err := serveConfigz()
		if err != nil {
			return err
		}
		if err := writeFile(filepath.Join(out, "kube-proxy-configmap-"+mode+".yaml"), cm); err != nil {
			return err
		}
		if err := writeFile(filepath.Join(out, "configz-"+mode+".json"), body); err != nil {
			return err
		}
	}
	return nil
}

// checkSame compares one setting.
func checkSame(what string, got, want any) error {
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("%s: config says %v, proxier used %v", what, got, want)
	}
	return nil
}
