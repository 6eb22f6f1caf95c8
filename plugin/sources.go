package plugin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// SourceOptions are the offline inputs every command reads: saved dumps,
// API objects and metrics. Formats are detected, not declared.
type SourceOptions struct {
	Dumps   []string
	Objects []string
	Metrics []string
	Config  []string
	Node    string

	In io.Reader // stdin, for "-"
}

// AddFlags registers --from-dump, --from-objects and --node.
func (o *SourceOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringArrayVar(&o.Dumps, "from-dump", nil, "read a saved ruleset (iptables-save, ip6tables-save, nft list ruleset, nft -j list ruleset, knftables dump) or kube-proxy metrics; repeatable; - reads stdin")
	fs.StringArrayVar(&o.Objects, "from-objects", nil, "read Services and EndpointSlices saved with \"kubectl get services,endpointslices -A -o json\" (or -o yaml); repeatable")
	fs.StringVar(&o.Node, "node", "", "the node the dump comes from (traffic policies depend on it)")
	fs.StringArrayVar(&o.Metrics, "from-metrics", nil, "read kube-proxy's /metrics saved from the node (curl 127.0.0.1:10249/metrics); repeatable")
	fs.StringArrayVar(&o.Config, "from-config", nil, "read kube-proxy's configuration: its /configz JSON, a KubeProxyConfiguration file, or the kube-proxy ConfigMap (-o yaml or json)")
}

// Validate checks the flags.
func (o *SourceOptions) Validate() error {
	if len(o.Dumps) == 0 {
		return fmt.Errorf("no ruleset given: pass --from-dump FILE (live collection with --node alone is not available yet)")
	}
	stdin := 0
	for _, d := range append(append(append(append([]string{}, o.Dumps...), o.Objects...), o.Metrics...), o.Config...) {
		if d == "-" {
			stdin++
		}
	}
	if stdin > 1 {
		return fmt.Errorf("only one input can be read from stdin (-)")
	}
	return nil
}

// Loaded is what the sources held.
type Loaded struct {
	Ruleset *inspect.Ruleset
	Metrics []*inspect.Metrics
	Objects *correlate.Objects // nil when no --from-objects
	Config  *inspect.ProxyConfig
}

func (o *SourceOptions) open(name string) (io.ReadCloser, string, error) {
	if name == "-" {
		in := o.In
		if in == nil {
			in = os.Stdin
		}
		return io.NopCloser(in), "<stdin>", nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, name, err
	}
	return f, name, nil
}

// Load reads every source.
func (o *SourceOptions) Load() (*Loaded, error) {
	l := &Loaded{Ruleset: &inspect.Ruleset{}}
	for _, name := range o.Dumps {
		rc, src, err := o.open(name)
		if err != nil {
			return nil, err
		}
		in, err := inspect.Read(rc, src)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if in.Ruleset != nil {
			l.Ruleset.Merge(in.Ruleset)
		}
		if in.Metrics != nil {
			l.Metrics = append(l.Metrics, in.Metrics)
		}
	}
	for _, name := range o.Metrics {
		rc, src, err := o.open(name)
		if err != nil {
			return nil, err
		}
		m, err := inspect.ParseMetrics(rc, src)
		rc.Close()
		if err != nil {
			return nil, err
		}
		l.Metrics = append(l.Metrics, m)
	}
	for _, name := range o.Config {
		rc, src, err := o.open(name)
		if err != nil {
			return nil, err
		}
		cfg, err := inspect.ParseProxyConfig(rc, src)
		rc.Close()
		if err != nil {
			return nil, err
		}
		l.Config = cfg // the last one wins
	}
	for _, name := range o.Objects {
		rc, src, err := o.open(name)
		if err != nil {
			return nil, err
		}
		objs, err := correlate.ReadObjects(rc, src)
		rc.Close()
		if err != nil {
			return nil, err
		}
		if l.Objects == nil {
			l.Objects = &correlate.Objects{}
		}
		l.Objects.Add(objs)
	}
	if l.Config == nil && l.Objects != nil {
		l.Config = configFromObjects(l.Objects)
	}
	if len(l.Ruleset.IPTables) == 0 && len(l.Ruleset.NFTables) == 0 {
		return nil, fmt.Errorf("the inputs hold no ruleset (only metrics?): pass an iptables-save or nft dump with --from-dump")
	}
	return l, nil
}

// configFromObjects reads kube-proxy's configuration from the kube-system
// kube-proxy ConfigMap when the objects include it.
func configFromObjects(objs *correlate.Objects) *inspect.ProxyConfig {
	for _, o := range objs.Other {
		cm, ok := o.(*corev1.ConfigMap)
		if !ok || cm.Namespace != "kube-system" || cm.Name != "kube-proxy" {
			continue
		}
		cm.APIVersion, cm.Kind = "v1", "ConfigMap"
		data, err := json.Marshal(cm)
		if err != nil {
			continue
		}
		if cfg, err := inspect.ParseProxyConfig(bytes.NewReader(data), "configmap/kube-system/kube-proxy"); err == nil {
			return cfg
		}
	}
	return nil
}
