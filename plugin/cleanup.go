package plugin

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// CleanupOptions are the options of `cleanup`.
type CleanupOptions struct {
	genericiooptions.IOStreams
	DryRun bool
	Client kubernetes.Interface // set by Complete; tests inject a fake
	kube   *genericclioptions.ConfigFlags
	now    func() time.Time
}

const cleanupExample = `  # Delete debug pods a killed run left behind, in every namespace
  %[1]s cleanup

  # Only list them
  %[1]s cleanup --dry-run`

// NewCmdCleanup builds `cleanup`.
func NewCmdCleanup(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &CleanupOptions{IOStreams: streams, kube: kube, now: time.Now}
	cmd := &cobra.Command{
		Use:   "cleanup [--dry-run]",
		Short: "Delete debug pods the plugin left behind",
		Long: `Delete the debug pods this plugin created and did not delete (a killed run,
a lost connection), in every namespace. Only pods labelled
` + collect.LabelManagedBy + `=` + collect.ManagedBy + ` are touched. Every run deletes
its own pod on success, error and Ctrl-C, and the pod's activeDeadlineSeconds
stops it anyway; this is for the rest.`,
		Example: fmt.Sprintf(cleanupExample, name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Complete(); err != nil {
				return err
			}
			return o.Run(cmd)
		},
	}
	cmd.Flags().BoolVar(&o.DryRun, "dry-run", false, "only list the pods")
	return cmd
}

// Complete builds the client.
func (o *CleanupOptions) Complete() error {
	if o.Client != nil {
		return nil
	}
	cfg, err := o.kube.ToRESTConfig()
	if err != nil {
		return fmt.Errorf("cannot reach the cluster: %w", err)
	}
	o.Client, err = kubernetes.NewForConfig(cfg)
	return err
}

// Run lists and deletes.
func (o *CleanupOptions) Run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	pods, err := o.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: collect.LabelManagedBy + "=" + collect.ManagedBy})
	if err != nil {
		return fmt.Errorf("listing the plugin's pods in all namespaces: %w (RBAC: list pods cluster-wide; see %s)", err, collect.RBACFile)
	}
	if len(pods.Items) == 0 {
		fmt.Fprintln(o.Out, "no debug pods of kubectl-proxyrules left")
		return nil
	}
	failed := 0
	for _, p := range pods.Items {
		// The label selector chose them; check again, so that nothing else
		// is ever deleted.
		if p.Labels[collect.LabelManagedBy] != collect.ManagedBy {
			continue
		}
		desc := fmt.Sprintf("pod %s/%s (node %s, age %s", p.Namespace, p.Name, p.Spec.NodeName, o.now().Sub(p.CreationTimestamp.Time).Round(time.Second))
		if by := p.Annotations[collect.AnnotationStartedBy]; by != "" {
			desc += ", started by " + by
		}
		desc += ")"
		if o.DryRun {
			fmt.Fprintln(o.Out, "would delete "+desc)
			continue
		}
		err := o.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !collect.IsNotFound(err) {
			fmt.Fprintf(o.ErrOut, "could not delete %s: %v\n", desc, err)
			failed++
			continue
		}
		fmt.Fprintln(o.Out, "deleted "+desc)
	}
	if failed > 0 {
		return fmt.Errorf("%d pods could not be deleted", failed)
	}
	return nil
}
