package kpconfig

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"
)

// FromConfigMap reads a ConfigMap's data as Parse reads the whole
// ConfigMap: the same configuration, the same warnings, the same errors.
func TestFromConfigMapEqualsParse(t *testing.T) {
	for _, tc := range []struct{ name, yaml string }{
		{"kubeadm", kubeadmConfigMapYAML(kubeadmConfigConf)},
		{"nftables, another name", strings.Replace(strings.Replace(kubeadmConfigMapYAML(kubeadmConfigConf), "mode: iptables", "mode: nftables", 1), "name: kube-proxy\n", "name: proxy-cfg\n", 1)},
		{"another key", strings.Replace(kubeadmConfigMapYAML(kubeadmConfigConf), "config.conf:", "proxy.yaml:", 1)},
		{"no config", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\ndata:\n  kubeconfig.conf: x\n"},
		{"no data", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\n"},
		{"broken", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\ndata:\n  config.conf: \"{{{\"\n"},
		{"another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kube-proxy\ndata:\n  config.conf: \"kind: Foo\"\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var cm struct {
				Metadata struct{ Name string }
				Data     map[string]string
			}
			if err := yaml.Unmarshal([]byte(tc.yaml), &cm); err != nil {
				t.Fatal(err)
			}
			want, wantErr := Parse(strings.NewReader(tc.yaml), "cm")
			got, err := FromConfigMap(cm.Metadata.Name, cm.Data, "cm")
			if (err == nil) != (wantErr == nil) || err != nil && err.Error() != wantErr.Error() {
				t.Fatalf("error %v, Parse: %v", err, wantErr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("(-Parse +FromConfigMap):\n%s", diff)
			}
		})
	}
}
