//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"
)

// The suite runs as a cluster that installed the project's manifests does:
// `kubectl apply -f deploy/` (namespace kubectl-proxyrules, RBAC, admission
// policies) before any test; every live test's debug pod is admitted by
// those policies, whoever runs it.

const debugNS = "kubectl-proxyrules"

// group is the group deploy/ grants to.
var member = []string{"--as", "alice", "--as-group", "kubectl-proxyrules-users"}

func applyDeploy() error {
	if _, err := run(nil, "kubectl", "apply", "-f", filepath.Join(repoRoot, "deploy")); err != nil {
		return err
	}
	// No controller-manager: the namespace's default ServiceAccount, which
	// admission wants, is made by hand.
	run(nil, "kubectl", "-n", debugNS, "create", "serviceaccount", "default")
	if err := syncQuotas(context.Background()); err != nil {
		return fmt.Errorf("the quotas' status: %w", err)
	}
	// Policies take effect a moment after they are created: wait until a
	// pod that is not the plugin's is refused.
	return waitPolicy(debugNS, "kubectl-proxyrules-debug-pod")
}

// waitPolicy waits until the named policy refuses a pod that is not the
// plugin's in namespace ns.
func waitPolicy(ns, policy string) error {
	pod := fmt.Sprintf(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"policy-probe","namespace":%q},
"spec":{"nodeName":"node-a","containers":[{"name":"c","image":"registry.k8s.io/kube-proxy:v1.37.2","command":["sleep","1"]}]}}`, ns)
	var last error
	for start := time.Now(); time.Since(start) < 60*time.Second; time.Sleep(200 * time.Millisecond) {
		_, err := run([]byte(pod), "kubectl", "create", "--dry-run=server", "-f", "-")
		if err != nil && strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'") {
			return nil
		}
		last = err
	}
	return fmt.Errorf("policy %s not enforced after 60 s (last: %v)", policy, last)
}
