package correlate

import (
	"bytes"
	"fmt"
	"testing"
	"time"
)

// A large input read whole is collected once decoded (releaseInput), a
// small one is not; both decode the same way.
func TestObjectsReleasedOnceDecoded(t *testing.T) {
	collected := make(chan struct{}, 4)
	defer func(gc func()) { collectGarbage = gc }(collectGarbage)
	collectGarbage = func() { collected <- struct{}{} }
	for _, tc := range []struct {
		services int
		collect  bool
	}{{10, false}, {4000, true}} {
		buf := serviceList(tc.services, 20)
		if big := buf.Len() >= bigInput; big != tc.collect {
			t.Fatalf("%d Services: %d bytes, want them %v the threshold", tc.services, buf.Len(), map[bool]string{true: "over", false: "under"}[tc.collect])
		}
		objs, err := ReadObjects(bytes.NewReader(buf.Bytes()), "objects.json")
		if err != nil || len(objs.Services) != tc.services {
			t.Fatalf("%d Services: read %v, err %v", tc.services, objs, err)
		}
		select {
		case <-collected:
			if !tc.collect {
				t.Errorf("%d Services (%d bytes): collected, want not", tc.services, buf.Len())
			}
		case <-time.After(map[bool]time.Duration{true: 10 * time.Second, false: 200 * time.Millisecond}[tc.collect]):
			if tc.collect {
				t.Errorf("%d Services (%d bytes): not collected once decoded", tc.services, buf.Len())
			}
		}
	}
}

// serviceList is a List of n Services, each with one EndpointSlice of eps
// endpoints, as the API server prints it.
func serviceList(n, eps int) *bytes.Buffer {
	var b bytes.Buffer
	b.WriteString(`{"apiVersion":"v1","kind":"List","items":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"apiVersion":"v1","kind":"Service","metadata":{"name":"svc-%d","namespace":"bench"},"spec":{"clusterIP":"10.96.%d.%d","ports":[{"name":"http","port":80,"protocol":"TCP","targetPort":8080}]}},`, i, i/256, i%256)
		fmt.Fprintf(&b, `{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"svc-%d-1","namespace":"bench","labels":{"kubernetes.io/service-name":"svc-%d"}},"addressType":"IPv4","ports":[{"name":"http","port":8080,"protocol":"TCP"}],"endpoints":[`, i, i)
		for e := range eps {
			if e > 0 {
				b.WriteByte(',')
			}
			fmt.Fprintf(&b, `{"addresses":["10.%d.%d.%d"],"conditions":{"ready":true,"serving":true,"terminating":false},"nodeName":"node-%d","zone":"zone-a"}`, 100+i/65536, i/256%256, i%256, e%3)
		}
		b.WriteString(`]}`)
	}
	b.WriteString(`]}`)
	return &b
}
