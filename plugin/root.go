// Package plugin holds the cobra commands, cluster access and rendering of
// kubectl-proxyrules.
package plugin

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// CommandName is how the user invokes the plugin: "kubectl proxyrules" when
// run through kubectl, the binary name otherwise.
func CommandName() string {
	base := filepath.Base(os.Args[0])
	if strings.HasPrefix(base, "kubectl-") {
		return "kubectl " + strings.ReplaceAll(strings.TrimSuffix(strings.TrimPrefix(base, "kubectl-"), ".exe"), "_", "-")
	}
	return base
}

// rootName names the command tree in usage lines and examples. Tests pin it,
// so that help does not depend on os.Args[0].
var rootName = CommandName

const rootExample = `  # What is wrong on this node? (reads it through a short-lived debug pod)
  %[1]s triage --node ip-10-0-1-7

  # Why does svc/web get no traffic there?
  %[1]s explain svc/web -n shop --node ip-10-0-1-7

  # Which Service owns each kube-proxy chain of a dump saved on the node?
  %[1]s map --from-dump iptables-save.txt --from-objects objects.json --node ip-10-0-1-7

  # Which version is installed?
  %[1]s version

  # Complete sub-commands, flags, namespaces and nodes in bash (see completion --help)
  source <(%[2]s completion bash)`

// NewCmdRoot builds the command tree.
func NewCmdRoot(streams genericiooptions.IOStreams) *cobra.Command {
	name := rootName()
	binary := strings.ReplaceAll(name, " ", "-")
	root := &cobra.Command{
		// Use is the binary's name, which cobra's completion scripts register;
		// help shows the display name, "kubectl proxyrules" as a plugin.
		Use:         binary,
		Annotations: map[string]string{cobra.CommandDisplayNameAnnotation: name},
		Short:       "What kube-proxy programmed on a node, for which Service, and what is wrong with it",
		Long: `kubectl proxyrules reads the rules kube-proxy programmed on a node (iptables or
nftables) and joins them with the Services and EndpointSlices, so that every
KUBE-SVC-/KUBE-SEP- chain gets a name you recognise.

The kubectl flags (--kubeconfig, --context, -n, ...) select the cluster, as for
kubectl; the rarer ones (--server, --token, --as, ...) are accepted too.`,
		Example:       fmt.Sprintf(rootExample, name, binary),
		Version:       GetVersion().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	root.SetFlagErrorFunc(suggestFlags) // inherited by every sub-command
	useGroupedHelp(root)
	useWrappedHelp(root)
	// --version without cobra's -v shorthand: kubectl uses -v for verbosity.
	root.Flags().Bool("version", false, "print the version and exit")
	root.SetVersionTemplate("{{.DisplayName}} {{.Version}}\n")
	kube, cluster := AddKubectlFlags(root)

	root.AddCommand(NewCmdMap(name, streams, kube))
	explainCmd := NewCmdExplain(name, streams, kube)
	if explainCmd.ValidArgsFunction == nil {
		explainCmd.ValidArgsFunction = ServiceArgCompletion(cluster) // svc/<TAB>
	}
	root.AddCommand(explainCmd)
	traceCmd := NewCmdTrace(name, streams, kube)
	root.AddCommand(traceCmd)
	root.AddCommand(NewCmdStale(name, streams, kube))
	root.AddCommand(NewCmdMasq(name, streams, kube))
	root.AddCommand(NewCmdCounts(name, streams, kube))
	root.AddCommand(NewCmdConntrack(name, streams, kube))
	root.AddCommand(NewCmdTriage(name, streams, kube))
	diffCmd := NewCmdDiff(name, streams, kube)
	diffCmd.ValidArgsFunction = diffArgCompletion(cluster)
	root.AddCommand(diffCmd)
	root.AddCommand(NewCmdCollect(name, streams, kube))
	root.AddCommand(NewCmdCleanup(name, streams, kube))
	root.AddCommand(NewCmdVersion(name, streams))

	// --node completes node names from the cluster, on every command.
	for _, c := range root.Commands() {
		if _, done := c.GetFlagCompletionFunc("node"); c.Flags().Lookup("node") != nil && !done {
			_ = c.RegisterFlagCompletionFunc("node", NodeCompletion(cluster))
		}
	}
	markRunErrors(root) // their text may quote data: see ErrorText
	return root
}
