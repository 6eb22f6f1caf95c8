package collect

import "testing"

func TestKubeProxyVersion(t *testing.T) {
	for image, want := range map[string]string{
		"registry.k8s.io/kube-proxy:v1.37.2":                                                     "v1.37.2",
		"602401143452.dkr.ecr.eu-west-1.amazonaws.com/eks/kube-proxy:v1.36.4-minimal-eksbuild.2": "v1.36.4",
		"registry.k8s.io/kube-proxy:v1.37.2@sha256:0123":                                         "v1.37.2",
		"localhost:5000/kube-proxy:v1.38.0":                                                      "v1.38.0",
		"registry.k8s.io/kube-proxy@sha256:0123":                                                 "",
		"registry.k8s.io/kube-proxy:latest":                                                      "",
		"nicolaka/netshoot:v0.13":                                                                "",
		"example.com/my-kube-proxy:v1.37.2":                                                      "",
	} {
		if got := KubeProxyVersion(image); got != want {
			t.Errorf("%s: %q, want %q", image, got, want)
		}
	}
}
