package correlate_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// What `kubectl get all,endpointslices,nodes -A -o json` prints: the kinds
// the analysis reads are decoded, others kept unstructured, none refused.
func TestReadObjectsKinds(t *testing.T) {
	const list = `{"apiVersion":"v1","kind":"List","items":[
{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"shop"},"spec":{"clusterIP":"10.96.0.10","ports":[{"port":80,"protocol":"TCP"}]}},
{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"web-1","namespace":"shop","labels":{"kubernetes.io/service-name":"web"}},"addressType":"IPv4","endpoints":[{"addresses":["10.244.0.5"]}]},
{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-a","labels":{"topology.kubernetes.io/zone":"zone-a"}}},
{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"shop"}}]}`
	objs, err := correlate.ReadObjects(strings.NewReader(list), "all.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(objs.Services) != 1 || len(objs.EndpointSlices) != 1 || len(objs.Other) != 2 {
		t.Fatalf("services %d, slices %d, other %d", len(objs.Services), len(objs.EndpointSlices), len(objs.Other))
	}
	if n, ok := objs.Other[0].(*corev1.Node); !ok || n.Labels["topology.kubernetes.io/zone"] != "zone-a" {
		t.Errorf("node: %#v", objs.Other[0])
	}
	if u, ok := objs.Other[1].(*unstructured.Unstructured); !ok || u.GetKind() != "Deployment" {
		t.Errorf("deployment: %#v", objs.Other[1])
	}
}
