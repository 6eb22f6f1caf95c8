package collect

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// ListServiceObjects reads one Service and its EndpointSlices (those
// labelled kubernetes.io/service-name, the ones kube-proxy reads): what
// explaining it takes, where every object of a big cluster is megabytes.
// No Service of that name (or no right to get it, which only listing is
// granted) is nil, nil: the caller lists everything, for suggestions.
func ListServiceObjects(ctx context.Context, client kubernetes.Interface, namespace, name string) (*correlate.Objects, error) {
	svc, err := client.CoreV1().Services(namespace).Get(ctx, name, metav1.GetOptions{})
	if IsNotFound(err) || apierrors.IsForbidden(err) {
		return nil, nil
	}
	if err != nil {
		return nil, apiError(err, "get", "services", namespace, "explain the Service")
	}
	objs := &correlate.Objects{Services: []*corev1.Service{svc}}
	opts := metav1.ListOptions{Limit: 500, LabelSelector: discoveryv1.LabelServiceName + "=" + name}
	for {
		slices, err := client.DiscoveryV1().EndpointSlices(namespace).List(ctx, opts)
		if err != nil {
			return nil, apiError(err, "list", "endpointslices.discovery.k8s.io", namespace, "compare the rules with the endpoints")
		}
		for i := range slices.Items {
			objs.EndpointSlices = append(objs.EndpointSlices, &slices.Items[i])
		}
		if opts.Continue = slices.Continue; opts.Continue == "" {
			return objs, nil
		}
	}
}
