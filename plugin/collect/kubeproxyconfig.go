package collect

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect/kpconfig"
)

// KubeProxyConfigOf reads kube-proxy's configuration from its ConfigMap.
func KubeProxyConfigOf(cm *corev1.ConfigMap) (*kpconfig.Config, error) {
	return kpconfig.FromConfigMap(cm.Name, cm.Data, "configmap/"+cm.Namespace+"/"+cm.Name)
}

// KubeProxyConfig is kube-proxy's configuration from the kube-system
// kube-proxy ConfigMap, when the objects include it and it reads.
func KubeProxyConfig(objs *correlate.Objects) *kpconfig.Config {
	for _, o := range objs.Other {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Namespace != "kube-system" || cm.Name != "kube-proxy" {
			continue
		}
		if cfg, err := KubeProxyConfigOf(cm); err == nil {
			return cfg
		}
	}
	return nil
}
