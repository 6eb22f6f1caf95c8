package correlate

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzFastObjects compares the fast objects decoder with the generic one
// on arbitrary input: what the generic decoder reads, ReadObjects reads
// the same (the same service ports; on the fast path the same fields);
// the fast path never takes malformed JSON. (It may read objects the
// generic decoder refuses for a malformed value of a field the analysis
// does not read: see objects_fast.go.)
func FuzzFastObjects(f *testing.F) {
	small, err := os.ReadFile("../testdata/fixtures/small-v1.37/objects.json")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(small)
	f.Add([]byte(`{"apiVersion":"v1","kind":"List","items":[{"apiVersion":"v1","kind":"Service","metadata":{"name":"a","namespace":"b"},"spec":{"clusterIP":"10.0.0.1","ports":[{"name":"p","port":80,"protocol":"TCP"}]}},` +
		`{"apiVersion":"discovery.k8s.io/v1","kind":"EndpointSlice","metadata":{"name":"a-1","namespace":"b","labels":{"kubernetes.io/service-name":"a"}},"addressType":"IPv4","endpoints":[{"addresses":["10.1.1.1"],"conditions":{"ready":true},"hints":{"forZones":[{"name":"z"}]}}],"ports":[{"name":"p","port":80,"protocol":"TCP"}]}]}`))
	f.Add([]byte(`{"apiVersion":"v1","Kind":"Service","metadata":{"n\u0061me":"a"}} null {"kind":"List","items":[{"kind":"List","items":[]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		generic, genErr := decodeGeneric(bytes.NewReader(data), "fuzz")
		fast, _, ok := decodeFast(data, nil)
		if ok && !validJSONStream(data) {
			t.Fatalf("the fast path took malformed JSON %q", data)
		}
		got, err := ReadObjects(bytes.NewReader(data), "fuzz")
		if genErr != nil {
			if !ok && (err == nil || err.Error() != genErr.Error()) {
				t.Fatalf("generic error %q, ReadObjects %v", genErr, err)
			}
			return
		}
		if len(generic.Services)+len(generic.EndpointSlices)+len(generic.Other) == 0 {
			return
		}
		if err != nil {
			t.Fatalf("the generic decoder reads it, ReadObjects: %v", err)
		}
		if ok {
			for i, s := range generic.Services {
				if i >= len(fast.Services) || !cmp.Equal(project(s, fastServiceFields), fast.Services[i]) {
					t.Fatalf("service %d differs: %s", i, cmp.Diff(project(s, fastServiceFields), fast.Services[i]))
				}
			}
			for i, s := range generic.EndpointSlices {
				if i >= len(fast.EndpointSlices) || !cmp.Equal(project(s, fastSliceFields), fast.EndpointSlices[i]) {
					t.Fatalf("slice %d differs", i)
				}
			}
			if len(fast.Services) != len(generic.Services) || len(fast.EndpointSlices) != len(generic.EndpointSlices) || len(fast.Other) != len(generic.Other) {
				t.Fatalf("counts differ")
			}
		}
		generic.dropInvalid() // as ReadObjects does on either path
		if diff := cmp.Diff(generic.ServicePorts(), got.ServicePorts(), cmp.AllowUnexported(ServicePort{}, Endpoint{})); diff != "" {
			t.Fatalf("service ports (-generic +ReadObjects):\n%s", diff)
		}
	})
}

// validJSONStream says whether data is a stream of well-formed JSON values.
func validJSONStream(data []byte) bool {
	dec := json.NewDecoder(bytes.NewReader(data))
	for {
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return errors.Is(err, io.EOF)
		}
	}
}
