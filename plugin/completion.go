package plugin

import (
	"context"
	"io"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
)

// Shell completion. Static completion (sub-commands, flags, fixed flag
// values) is cobra's; this file adds the values that come from the cluster
// (namespaces, nodes, svc/NAME) and from the kubeconfig (contexts, clusters,
// users). The listing functions take a kubernetes.Interface so that they are
// tested with client-go's fake clientset; the cobra glue builds the real one
// from the kubectl flags of the command line being completed.

// completionTimeout bounds each API call made while the user waits on TAB,
// unless --request-timeout says otherwise.
const completionTimeout = 5 * time.Second

// Cluster returns a clientset and the namespace selected by -n or the
// kubeconfig context. Commands that need the cluster take one, so that
// tests can substitute a fake.
type Cluster func() (kubernetes.Interface, string, error)

// ClusterFromFlags builds the clientset from the kubectl flags
// (--kubeconfig, --context, -n, …) as parsed at call time.
func ClusterFromFlags(cf *genericclioptions.ConfigFlags) Cluster {
	return func() (kubernetes.Interface, string, error) {
		rc, err := cf.ToRESTConfig()
		if err != nil {
			return nil, "", err
		}
		rc = rest.CopyConfig(rc)
		if rc.Timeout == 0 {
			rc.Timeout = completionTimeout
		}
		rc.WarningHandler = rest.NoWarnings{}
		cs, err := kubernetes.NewForConfig(rc)
		if err != nil {
			return nil, "", err
		}
		ns, _, err := cf.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return nil, "", err
		}
		return cs, ns, nil
	}
}

// CompleteNamespaces lists the namespaces whose name starts with toComplete.
func CompleteNamespaces(ctx context.Context, cs kubernetes.Interface, toComplete string) ([]string, error) {
	list, err := cs.CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return withPrefix(names, toComplete), nil
}

// CompleteNodes lists the nodes whose name starts with toComplete.
func CompleteNodes(ctx context.Context, cs kubernetes.Interface, toComplete string) ([]string, error) {
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, n := range list.Items {
		names = append(names, n.Name)
	}
	return withPrefix(names, toComplete), nil
}

// serviceResourcePrefixes are the spellings of the Service resource that a
// svc/NAME argument accepts, as kubectl does; svc/ is offered.
var serviceResourcePrefixes = []string{"svc/", "service/", "services/"}

// CompleteServices lists the Services of namespace as svc/NAME. When
// toComplete already starts with service/ or services/, that spelling is
// kept; a bare prefix (no slash) also completes bare names.
func CompleteServices(ctx context.Context, cs kubernetes.Interface, namespace, toComplete string) ([]string, error) {
	prefix := "svc/"
	for _, p := range serviceResourcePrefixes {
		if strings.HasPrefix(toComplete, p) {
			prefix = p
		}
	}
	bare := toComplete != "" && !strings.Contains(toComplete, "/")
	list, err := cs.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(list.Items))
	for _, s := range list.Items {
		names = append(names, prefix+s.Name)
		if bare {
			names = append(names, s.Name)
		}
	}
	return withPrefix(names, toComplete), nil
}

// CompleteKubeconfig lists the contexts, clusters or users ("context",
// "cluster", "user") of a kubeconfig whose name starts with toComplete.
func CompleteKubeconfig(cfg *clientcmdapi.Config, kind, toComplete string) []string {
	var names []string
	switch kind {
	case "context":
		for n := range cfg.Contexts {
			names = append(names, n)
		}
	case "cluster":
		for n := range cfg.Clusters {
			names = append(names, n)
		}
	case "user":
		for n := range cfg.AuthInfos {
			names = append(names, n)
		}
	}
	return withPrefix(names, toComplete)
}

// withPrefix keeps the names that start with prefix and can be
// candidates (completable), sorted.
func withPrefix(names []string, prefix string) []string {
	out := make([]string, 0, len(names))
	for _, n := range names {
		if strings.HasPrefix(n, prefix) && completable(n) {
			out = append(out, n)
		}
	}
	sort.Strings(out)
	return out
}

// completable says whether a name can be a shell completion candidate
// as it is: cobra prints one candidate a line, a tab starts its
// description, and the shell would act on a control character, so a name
// with whitespace, a control or bidirectional character or invalid UTF-8
// (a hostile objects file, dump or cluster) is dropped, never split into
// two candidates or escaped into one that matches nothing.
func completable(name string) bool {
	return utf8.ValidString(name) && !strings.ContainsFunc(name, func(r rune) bool {
		return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)
	})
}

// clusterCompletion adapts a listing function to cobra. Errors (no
// kubeconfig, unreachable cluster, RBAC) give no candidates and no file
// names; they are logged with BASH_COMP_DEBUG_FILE set.
func clusterCompletion(cluster Cluster, list func(ctx context.Context, cs kubernetes.Interface, ns, toComplete string) ([]string, error)) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cs, ns, err := cluster()
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		ctx := cmd.Context()
		if ctx == nil {
			ctx = context.Background()
		}
		names, err := list(ctx, cs, ns, toComplete)
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// NamespaceCompletion completes -n/--namespace.
func NamespaceCompletion(cluster Cluster) cobra.CompletionFunc {
	return clusterCompletion(cluster, func(ctx context.Context, cs kubernetes.Interface, _, toComplete string) ([]string, error) {
		return CompleteNamespaces(ctx, cs, toComplete)
	})
}

// NodeCompletion completes a --node flag.
func NodeCompletion(cluster Cluster) cobra.CompletionFunc {
	return clusterCompletion(cluster, func(ctx context.Context, cs kubernetes.Interface, _, toComplete string) ([]string, error) {
		return CompleteNodes(ctx, cs, toComplete)
	})
}

// ServiceArgCompletion is a ValidArgsFunction for commands whose one
// positional argument is a Service: svc/NAME in the selected namespace.
func ServiceArgCompletion(cluster Cluster) cobra.CompletionFunc {
	svc := clusterCompletion(cluster, CompleteServices)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		// Offline, the Services of --from-objects.
		if files, _ := cmd.Flags().GetStringArray("from-objects"); len(files) > 0 {
			ns, _ := cmd.Flags().GetString("namespace")
			if all, _ := cmd.Flags().GetBool("all-namespaces"); all {
				ns = ""
			}
			if names, ok := offlineServices(InputFiles{Objects: files}, ns, toComplete); ok {
				return names, cobra.ShellCompDirectiveNoFileComp
			}
		}
		return svc(cmd, args, toComplete)
	}
}

// kubeconfigCompletion completes --context, --cluster or --user from the
// kubeconfig (no API call).
func kubeconfigCompletion(cf *genericclioptions.ConfigFlags, kind string) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		cfg, err := cf.ToRawKubeConfigLoader().RawConfig()
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return CompleteKubeconfig(&cfg, kind, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// registerKubectlFlagCompletions wires the completions of the kubectl flags
// that AddKubectlFlags put on root.
func registerKubectlFlagCompletions(root *cobra.Command, cf *genericclioptions.ConfigFlags, cluster Cluster) {
	_ = root.RegisterFlagCompletionFunc("namespace", NamespaceCompletion(cluster))
	_ = root.RegisterFlagCompletionFunc("context", kubeconfigCompletion(cf, "context"))
	_ = root.RegisterFlagCompletionFunc("cluster", kubeconfigCompletion(cf, "cluster"))
	_ = root.RegisterFlagCompletionFunc("user", kubeconfigCompletion(cf, "user"))
}

// visibleKubectlFlags are the kubectl global flags shown in help; the others
// (--server, --token, --as-group, --certificate-authority, …) work but are
// hidden, as in kubectl, where they are listed by `kubectl options`.
var visibleKubectlFlags = map[string]bool{
	"kubeconfig": true, "context": true, "cluster": true, "user": true, "namespace": true, "request-timeout": true,
}

// AddKubectlFlags adds the kubectl global flags (--kubeconfig, --context,
// -n, …) to root as persistent flags and wires their completion. It returns
// the Cluster they select.
func AddKubectlFlags(root *cobra.Command) (*genericclioptions.ConfigFlags, Cluster) {
	cf := genericclioptions.NewConfigFlags(true)
	kubectlFlags := pflag.NewFlagSet("kubectl", pflag.ContinueOnError)
	cf.AddFlags(kubectlFlags)
	kubectlFlags.VisitAll(func(f *pflag.Flag) { f.Hidden = !visibleKubectlFlags[f.Name] })
	root.PersistentFlags().AddFlagSet(kubectlFlags)
	cluster := ClusterFromFlags(cf)
	registerKubectlFlagCompletions(root, cf, cluster)
	return cf, cluster
}

// offlineInputs are the files of a command line being completed
// (--from-dump, --from-objects, --from-metrics, --from-config), read
// quietly: completion works on saved inputs.
func offlineInputs(f *InputFlags) (*Loaded, bool) {
	if len(f.Dumps) == 0 && len(f.Objects) == 0 {
		return nil, false
	}
	quiet := (&Loader{ErrOut: io.Discard}).inputSet(Request{Table: f.Table,
		Files: InputFiles{Dumps: f.Dumps, Objects: f.Objects, Metrics: f.Metrics, Config: f.Config}})
	l := &Loaded{Ruleset: &inspect.Ruleset{}}
	if len(f.Dumps) > 0 {
		loaded, err := quiet.load()
		if err != nil {
			cobra.CompDebugln(err.Error(), false)
			return nil, false
		}
		l = loaded
	} else if objs, err := quiet.readObjects(); err == nil {
		l.Objects = objs
	}
	return l, true
}

// chainArgCompletion completes chain names from the dumps and objects on
// the command line: the chains a dump holds, or the names kube-proxy would
// give the objects' Service ports and endpoints.
func chainArgCompletion(o *MapOptions) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		l, ok := offlineInputs(&o.Inputs)
		if !ok {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		seen := map[string]bool{}
		var names []string
		add := func(n string) {
			if !seen[n] && strings.HasPrefix(n, toComplete) && completable(n) && correlate.LooksLikeChain(n) {
				seen[n] = true
				names = append(names, n)
			}
		}
		for _, t := range l.Ruleset.IPTables {
			for _, c := range t.Chains {
				add(c.Name)
			}
		}
		for _, t := range l.Ruleset.NFTables {
			for _, c := range t.Chains {
				add(c.Name)
			}
		}
		if len(names) == 0 && l.Objects != nil {
			for _, sp := range l.Objects.ServicePorts() {
				for _, c := range correlate.ChainsOfService([]*correlate.ServicePort{sp}) {
					add(c)
				}
			}
		}
		sort.Strings(names)
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// offlineServices completes svc/NAME from --from-objects, when given.
func offlineServices(files InputFiles, namespace, toComplete string) ([]string, bool) {
	if len(files.Objects) == 0 {
		return nil, false
	}
	objs, err := (&Loader{ErrOut: io.Discard}).inputSet(Request{Files: files}).readObjects()
	if err != nil {
		return nil, false
	}
	var names []string
	for _, s := range objs.Services {
		if namespace == "" || s.Namespace == namespace {
			names = append(names, "svc/"+s.Name)
		}
	}
	sort.Strings(names)
	// Cobra parses a command's flags twice while completing, so a
	// --from-objects array holds each file twice.
	return withPrefix(slices.Compact(names), toComplete), true
}

// diffArgCompletion completes A and B: node names from the cluster, and
// files (bundles) as the shell does.
func diffArgCompletion(cluster Cluster) cobra.CompletionFunc {
	nodes := NodeCompletion(cluster)
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		if len(args) >= 2 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		names, _ := nodes(cmd, args, toComplete)
		return names, cobra.ShellCompDirectiveDefault // and files: bundles
	}
}
