package kpconfig

import "fmt"

// FromConfigMap reads kube-proxy's configuration from the data of a
// ConfigMap named name (kubeadm's kube-proxy ConfigMap: key config.conf),
// as Parse reads the whole ConfigMap, without turning it into text first.
func FromConfigMap(name string, data map[string]string, source string) (*Config, error) {
	values := make(map[string]any, len(data))
	for k, v := range data {
		values[k] = v
	}
	obj := map[string]any{"metadata": map[string]any{"name": name}, "data": values}
	if data == nil {
		delete(obj, "data")
	}
	cfg := &Config{Source: source}
	if err := cfg.fromConfigMap(obj, 0); err != nil {
		return nil, fmt.Errorf("%s: %w", source, err)
	}
	return cfg, nil
}
