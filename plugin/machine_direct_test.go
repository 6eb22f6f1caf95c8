package plugin

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/netip"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// DirectInner is embedded (exported, as encoding/json inlines it).
type DirectInner dInner

// Types that take every branch of the direct encoders and of their
// hand-over to encoding/json.
type (
	dInner struct {
		Mode  string `json:"mode"`
		Extra string `json:"extra,omitempty"`
	}
	dOuter struct {
		*DirectInner
		Name    string            `json:"name"`
		Kind    dKind             `json:"kind"`
		Ev      dEvidence         `json:"ev"`
		EvPtr   *dEvidence        `json:"evPtr"`
		Addr    netip.Addr        `json:"addr"` // a text marshaler
		PtrM    dPtrMarshaler     `json:"ptrM"` // pointer receiver
		F       float64           `json:"f"`
		M       map[string]int    `json:"m"`
		B       []byte            `json:"b"`
		A       [2]int            `json:"a"`
		N       []int             `json:"n"`
		E       []int             `json:"e"`
		Omit    []string          `json:"omit,omitempty"`
		Any     any               `json:"any"`
		Nested  []dInner          `json:"nested"`
		U       uint16            `json:"u"`
		I       int64             `json:"i"`
		T       bool              `json:"t"`
		Untag   string            //
		Skip    string            `json:"-"`
		Ptr     *dInner           `json:"ptr"`
		Empty   struct{}          `json:"empty"`
		Strs    map[string]string `json:"strs,omitempty"`
		private int
	}
	dKind         string
	dEvidence     uint16
	dPtrMarshaler struct{ X int }
	dBadMarshaler struct{}
	dSpaced       struct{}
	// dClash has a clashing name: encoding/json's dominance rules decide.
	dClash struct {
		DirectInner
		Mode string `json:"mode"`
	}
	dTagged struct {
		dInner `json:"inner"`
	}
	dQuoted struct {
		Q int `json:"q,string"`
	}
)

func (e dEvidence) MarshalJSON() ([]byte, error) {
	if e == 0 {
		return []byte(`[]`), nil
	}
	return []byte(` [ "a<b" , {"k": "&"}, "\u2028"] `), nil
}

func (p *dPtrMarshaler) MarshalJSON() ([]byte, error) { return []byte(`{"p": 1}`), nil }

func (dBadMarshaler) MarshalJSON() ([]byte, error) { return nil, errors.New("no") }

func (dSpaced) MarshalJSON() ([]byte, error) { return []byte("{\n\"x\" :\t[ ]\n}"), nil }

// The direct encoders write, for each value, the bytes of
// json.MarshalIndent (or fail where it fails).
func TestDirectEncodersAreEncodingJSON(t *testing.T) {
	ev := dEvidence(3)
	full := dOuter{
		DirectInner: &DirectInner{Mode: "iptables", Extra: "x"},
		Name:        "a\"b\\c<d>&e\x01\u2028\u00e9\xff", Kind: "<service>", Ev: 5, EvPtr: &ev,
		Addr: netip.MustParseAddr("10.0.0.1"), F: 1.5e21, M: map[string]int{"b": 1, "a": 2}, B: []byte("hi"),
		N: nil, E: []int{}, Any: map[string]any{"z": []any{1, "x"}}, Nested: []dInner{{Mode: "m"}, {}},
		U: 65535, I: math.MinInt64, T: true, Untag: "u", Ptr: &dInner{}, Strs: map[string]string{"<": ">"},
	}
	tests := []struct {
		name string
		v    any
	}{
		{"full", full},
		{"full by pointer", &full},
		{"zero", dOuter{}},
		{"slice of structs", []dOuter{full, {}}},
		{"nil pointer", (*dOuter)(nil)},
		{"clash", dClash{DirectInner{Mode: "a"}, "b"}},
		{"tagged embedded", dTagged{dInner{Mode: "a"}}},
		{"spaced marshaler", []any{dSpaced{}, dSpaced{}}},
		{"deep", [][][]any{{{[]any{[]int{1}}}}}},
		{"empty string", ""},
		{"string option", dQuoted{7}},
		{"interface of pointer marshaler", []any{dPtrMarshaler{}, &dPtrMarshaler{}}},
	}
	for _, tc := range tests {
		want, err := json.MarshalIndent(tc.v, "", "  ")
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		var got bytes.Buffer
		if err := printMachine(&got, "json", struct {
			V any `json:"v"`
		}{tc.v}); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		wrapped, err := json.MarshalIndent(struct {
			V json.RawMessage `json:"v"`
		}{want}, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(string(wrapped)+"\n", got.String()); d != "" {
			t.Errorf("%s (-encoding/json +direct):\n%s", tc.name, d)
		}
	}
	for _, bad := range []any{dBadMarshaler{}, math.Inf(1), []any{1, math.NaN()}} {
		_, wantErr := json.Marshal(bad)
		err := printMachine(&bytes.Buffer{}, "json", struct {
			V any `json:"v"`
		}{bad})
		if err == nil || wantErr == nil || err.Error() != wantErr.Error() {
			t.Errorf("%#v: error %v, want encoding/json's %v", bad, err, wantErr)
		}
	}
}
