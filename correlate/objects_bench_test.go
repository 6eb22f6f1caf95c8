package correlate_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

type objectForm struct {
	name string
	data []byte
}

// objectForms are the objects of 5,000 Services × 20 endpoints in the two
// forms the plugin reads: compact and as kubectl -o json prints them.
func objectForms(b *testing.B) []objectForm {
	c := synth.Cluster{Services: 5000, Endpoints: 20}
	var forms []objectForm
	for _, f := range []struct {
		name  string
		write func(io.Writer) error
	}{{"compact", c.WriteObjectsJSON}, {"kubectl", c.WriteObjectsKubectl}} {
		var buf bytes.Buffer
		if err := f.write(&buf); err != nil {
			b.Fatal(err)
		}
		forms = append(forms, objectForm{f.name, buf.Bytes()})
	}
	return forms
}

// BenchmarkReadObjects decodes the Services and EndpointSlices of 5,000
// Services × 20 endpoints: compact (as the API server lists them and
// bundles keep them, 30 MB) and as kubectl -o json prints them (76 MB),
// then joins them into service ports. generic is the Kubernetes decoder
// the fast path replaces (kept for YAML and other kinds).
func BenchmarkReadObjects(b *testing.B) {
	for _, form := range objectForms(b) {
		data := form.data
		for _, path := range []string{"fast", "generic"} {
			b.Run(form.name+"/"+path, func(b *testing.B) {
				read := correlate.ReadObjects
				if path == "generic" {
					read = correlate.ReadObjectsGeneric
				}
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					objs, err := read(bytes.NewReader(data), "bench")
					if err != nil {
						b.Fatal(err)
					}
					if n := len(objs.ServicePorts()); n != 5000 {
						b.Fatalf("%d service ports", n)
					}
				}
			})
		}
	}
}

// BenchmarkDecodeFast is the fast decoder alone (no join into service
// ports), on the same two forms: the figure to hold against other JSON
// libraries decoding the same bytes into the same fields.
func BenchmarkDecodeFast(b *testing.B) {
	for _, form := range objectForms(b) {
		b.Run(form.name, func(b *testing.B) {
			b.SetBytes(int64(len(form.data)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				o, ok := correlate.DecodeFast(form.data)
				if !ok || len(o.EndpointSlices) != 5000 {
					b.Fatal("not decoded")
				}
			}
		})
	}
}
