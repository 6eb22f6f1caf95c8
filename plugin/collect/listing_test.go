package collect

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// TestListServiceObjects: explain's listing reads the Service and the
// slices labelled with its name, nothing of its neighbours, and leaves a
// Service it cannot find (or may not get) to the whole listing.
func TestListServiceObjects(t *testing.T) {
	other := testService()
	other.Name = "api"
	otherSlice := testSlice()
	otherSlice.Name, otherSlice.Labels = "api-xyz", map[string]string{discoveryv1.LabelServiceName: "api"}
	elsewhere := testSlice()
	elsewhere.Namespace = "prod" // the same name in another namespace
	unlabelled := testSlice()
	unlabelled.Name, unlabelled.Labels = "web-manual", nil // kube-proxy does not read it either
	second := testSlice()
	second.Name = "web-def34"
	objects := []runtime.Object{testService(), testSlice(), second, other, otherSlice, elsewhere, unlabelled}

	tests := []struct {
		name       string
		service    string
		forbidGet  bool
		wantSvc    bool
		wantSlices []string
	}{
		{name: "its own objects", service: "web", wantSvc: true, wantSlices: []string{"web-abc12", "web-def34"}},
		{name: "another Service", service: "api", wantSvc: true, wantSlices: []string{"api-xyz"}},
		{name: "not found: list everything", service: "webb"},
		{name: "get forbidden: list everything", service: "web", forbidGet: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset(objects...)
			if tc.forbidGet {
				client.PrependReactor("get", "services", func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, tc.service, nil)
				})
			}
			objs, err := ListServiceObjects(context.Background(), client, "default", tc.service)
			if err != nil {
				t.Fatal(err)
			}
			if !tc.wantSvc {
				if objs != nil {
					t.Fatalf("got %d Services, want none (the caller lists everything)", len(objs.Services))
				}
				return
			}
			if objs == nil || len(objs.Services) != 1 || objs.Services[0].Name != tc.service {
				t.Fatalf("Services %v, want only %s", objs, tc.service)
			}
			var got []string
			for _, s := range objs.EndpointSlices {
				got = append(got, s.Namespace+"/"+s.Name)
			}
			var want []string
			for _, n := range tc.wantSlices {
				want = append(want, "default/"+n)
			}
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("EndpointSlices %v, want %v", got, want)
			}
		})
	}
	// Any other failure is said, with what to do.
	client := fake.NewClientset()
	client.PrependReactor("list", "endpointslices", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "discovery.k8s.io", Resource: "endpointslices"}, "", nil)
	})
	client.Tracker().Add(&corev1.Service{ObjectMeta: testService().ObjectMeta})
	if _, err := ListServiceObjects(context.Background(), client, "default", "web"); err == nil {
		t.Error("a refused EndpointSlice listing gave no error")
	}
}
