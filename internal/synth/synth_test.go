package synth_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/iptables"
	"github.com/proxyrules/kubectl-proxyrules/inspect/nft"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// The generated files describe one cluster: the objects JSON decodes to the
// same service ports as Objects, and every generated ruleset (iptables-save,
// nft JSON, nft text) has every chain attributed and none stale.
func TestGeneratedNodeAgrees(t *testing.T) {
	c := synth.Cluster{Services: 60, Endpoints: 7}
	want := c.Objects()
	var decoded *correlate.Objects
	for name, write := range map[string]func(io.Writer) error{"compact": c.WriteObjectsJSON, "kubectl": c.WriteObjectsKubectl} {
		var buf bytes.Buffer
		if err := write(&buf); err != nil {
			t.Fatal(err)
		}
		got, err := correlate.ReadObjects(&buf, name)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want.ServicePorts(), got.ServicePorts(), cmp.AllowUnexported(correlate.ServicePort{}, correlate.Endpoint{})); diff != "" {
			t.Errorf("%s: the service ports differ from Objects' (-want +got):\n%s", name, diff)
		}
		if len(got.Services) != c.Services || len(got.EndpointSlices) != c.Services || got.EndpointSlices[7].Name != want.EndpointSlices[7].Name {
			t.Errorf("%s: %d Services, %d slices", name, len(got.Services), len(got.EndpointSlices))
		}
		decoded = got
	}
	for _, tc := range []struct {
		name   string
		write  func(*bytes.Buffer) error
		parse  func(*bytes.Buffer) (*inspect.Ruleset, error)
		chains int
	}{
		{"iptables-save", func(b *bytes.Buffer) error { return c.WriteIPTablesSave(b) },
			func(b *bytes.Buffer) (*inspect.Ruleset, error) { return iptables.Parse(b, "save") }, 5 + 60*8},
		{"nft-json", func(b *bytes.Buffer) error { return c.WriteNFTJSON(b) },
			func(b *bytes.Buffer) (*inspect.Ruleset, error) { return nft.ParseJSON(b, "json") }, 15 + 60},
		{"nft-text", func(b *bytes.Buffer) error { return c.WriteNFTText(b) },
			func(b *bytes.Buffer) (*inspect.Ruleset, error) { return nft.ParseText(b, "text") }, 15 + 60},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := tc.write(&buf); err != nil {
				t.Fatal(err)
			}
			rs, err := tc.parse(&buf)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range rs.Dumps {
				if len(d.Warnings) > 0 {
					t.Errorf("warnings: %v", d.Warnings)
				}
			}
			res := correlate.Attribute(rs, decoded)
			if len(res.Chains) != tc.chains {
				t.Errorf("%d chains, want %d", len(res.Chains), tc.chains)
			}
			for _, ch := range res.Chains {
				if ch.Stale || ch.Kind != kubeproxy.KindFixed && ch.ServicePort == "" {
					t.Errorf("chain %s: stale %v, service port %q", ch.Chain, ch.Stale, ch.ServicePort)
				}
			}
		})
	}
}
