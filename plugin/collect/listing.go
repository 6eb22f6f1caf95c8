package collect

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// ListObjects reads every Service and EndpointSlice of the cluster, 500 a
// page: what the rules are joined with, without reading a node.
func ListObjects(ctx context.Context, client kubernetes.Interface) (*correlate.Objects, error) {
	objs := &correlate.Objects{}
	var cont string
	for {
		svcs, err := client.CoreV1().Services("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return nil, apiError(err, "list", "services", "", "join the rules with their Services")
		}
		for i := range svcs.Items {
			objs.Services = append(objs.Services, &svcs.Items[i])
		}
		if cont = svcs.Continue; cont == "" {
			break
		}
	}
	for {
		slices, err := client.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{Limit: 500, Continue: cont})
		if err != nil {
			return nil, apiError(err, "list", "endpointslices.discovery.k8s.io", "", "compare the rules with the endpoints")
		}
		for i := range slices.Items {
			objs.EndpointSlices = append(objs.EndpointSlices, &slices.Items[i])
		}
		if cont = slices.Continue; cont == "" {
			break
		}
	}
	return objs, nil
}
