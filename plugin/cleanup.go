package plugin

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	// All deletes every pod of the plugin, anyone's, in any state.
	All    bool
	Client kubernetes.Interface // set by Complete; tests inject a fake
	kube   *genericclioptions.ConfigFlags
	now    func() time.Time
}

const cleanupExample = `  # Delete your own debug pods that a killed run left behind
  %[1]s cleanup

  # Only list them
  %[1]s cleanup --dry-run

  # Delete every debug pod of the plugin, whoever started it, even running
  %[1]s cleanup --all`

// NewCmdCleanup builds `cleanup`.
func NewCmdCleanup(name string, streams genericiooptions.IOStreams, kube *genericclioptions.ConfigFlags) *cobra.Command {
	o := &CleanupOptions{IOStreams: streams, kube: kube, now: time.Now}
	cmd := &cobra.Command{
		Use:   "cleanup [--dry-run] [--all]",
		Short: "Delete debug pods the plugin left behind",
		Long: `Delete the debug pods that your own runs of this plugin left behind (a
killed run, a lost connection), in every namespace: pods labelled
` + collect.LabelManagedBy + `=` + collect.ManagedBy + `, annotated as started by
you, that have finished or are past their deadline. Another run of yours in
progress, and other people's runs, are left alone. Every run deletes its own
pod on success, error and Ctrl-C, removes your leftovers before it starts a
new pod, and the pod's activeDeadlineSeconds stops it anyway; this is for
the rest.

--all deletes every pod with that label, whoever started it and whatever its
state, after listing them.`,
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
	cmd.Flags().BoolVar(&o.All, "all", false, "delete every debug pod of the plugin, anyone's, even a run in progress")
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

// Run lists, then deletes what is to go.
func (o *CleanupOptions) Run(cmd *cobra.Command) error {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	me := ""
	if !o.All {
		r, err := o.Client.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authnv1.SelfSubjectReview{}, metav1.CreateOptions{})
		if err != nil || r.Status.UserInfo.Username == "" {
			return fmt.Errorf("cannot tell who you are (SelfSubjectReview: %v), so not which debug pods are yours: pass --all to delete every pod of the plugin", err)
		}
		me = r.Status.UserInfo.Username
	}
	selector := metav1.ListOptions{LabelSelector: collect.LabelManagedBy + "=" + collect.ManagedBy}
	pods, err := o.Client.CoreV1().Pods("").List(ctx, selector)
	if apierrors.IsForbidden(err) {
		// The RBAC of deploy/ grants pods only where debug pods run.
		fmt.Fprintf(o.ErrOut, "you may not list pods in every namespace: looking in %s only\n", collect.DefaultDebugNamespace)
		pods, err = o.Client.CoreV1().Pods(collect.DefaultDebugNamespace).List(ctx, selector)
	}
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("listing the plugin's pods: %w (RBAC: list pods in %s; kubectl apply -f %s)", err, collect.DefaultDebugNamespace, collect.RBACFile)
	case err != nil:
		return fmt.Errorf("listing the plugin's pods: %w", err)
	}
	now := o.now()
	var doomed []corev1.Pod
	for _, p := range pods.Items {
		// The label selector chose them; check again, so that nothing else
		// is ever deleted.
		if p.Labels[collect.LabelManagedBy] != collect.ManagedBy {
			continue
		}
		done, why := collect.PodDone(&p, now)
		switch {
		case o.All:
		case p.Annotations[collect.AnnotationStartedBy] != me:
			continue // someone else's
		case !done:
			fmt.Fprintf(o.Out, "kept %s: %s, a run in progress? (--all deletes it)\n", o.describe(&p, now), why)
			continue
		}
		doomed = append(doomed, p)
	}
	if len(doomed) == 0 {
		if o.All {
			fmt.Fprintln(o.Out, "no debug pods of kubectl-proxyrules left")
		} else {
			fmt.Fprintf(o.Out, "no debug pods of kubectl-proxyrules left by %s\n", escapeData(me))
		}
		return nil
	}
	if o.All || o.DryRun {
		// What is about to go, all of it, before anything goes.
		verb := "deleting"
		if o.DryRun {
			verb = "would delete"
		}
		for i := range doomed {
			fmt.Fprintf(o.Out, "%s %s\n", verb, o.describe(&doomed[i], now))
		}
	}
	if o.DryRun {
		return nil
	}
	return o.delete(ctx, doomed, now, o.Out, o.ErrOut)
}

func (o *CleanupOptions) delete(ctx context.Context, pods []corev1.Pod, now time.Time, out, errOut io.Writer) error {
	failed := 0
	for i := range pods {
		p := &pods[i]
		err := o.Client.CoreV1().Pods(p.Namespace).Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64), Preconditions: &metav1.Preconditions{UID: &p.UID}})
		if err != nil && !collect.IsNotFound(err) {
			fmt.Fprintf(errOut, "could not delete %s: %s\n", o.describe(p, now), escapeData(err.Error()))
			failed++
			continue
		}
		fmt.Fprintln(out, "deleted "+o.describe(p, now))
	}
	if failed > 0 {
		return fmt.Errorf("%d pods could not be deleted", failed)
	}
	return nil
}

// describe names a pod for the user; its fields come from the cluster,
// where anyone who may create pods can write them: escaped.
func (o *CleanupOptions) describe(p *corev1.Pod, now time.Time) string {
	desc := fmt.Sprintf("pod %s/%s (node %s, age %s", p.Namespace, p.Name, p.Spec.NodeName, now.Sub(p.CreationTimestamp.Time).Round(time.Second))
	if by := p.Annotations[collect.AnnotationStartedBy]; by != "" {
		desc += ", started by " + by
	}
	return escapeData(desc + ")")
}

// RemoveTemporaryFiles removes what the command extracted or collected into
// temporary folders: for a second Ctrl-C, which quits without waiting.
func RemoveTemporaryFiles() { collect.RemoveTemps() }
