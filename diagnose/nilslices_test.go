package diagnose_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/diagnose"
	"github.com/proxyrules/kubectl-proxyrules/internal/fixture"
)

// nilSlices lists the JSON lists of v that would be written as null: a
// nil slice in a field without omitempty. Scripts read `.findings[]`, and
// jq fails on null where a list is promised.
func nilSlices(v reflect.Value, path string, seen map[uintptr]bool) []string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() || seen[v.Pointer()] {
			return nil
		}
		seen[v.Pointer()] = true
		return nilSlices(v.Elem(), path, seen)
	case reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return nilSlices(v.Elem(), path, seen)
	case reflect.Slice:
		var out []string
		for i := 0; i < v.Len(); i++ {
			out = append(out, nilSlices(v.Index(i), fmt.Sprintf("%s[%d]", path, i), seen)...)
		}
		return out
	case reflect.Map:
		var out []string
		for _, k := range v.MapKeys() {
			out = append(out, nilSlices(v.MapIndex(k), fmt.Sprintf("%s[%v]", path, k), seen)...)
		}
		return out
	case reflect.Struct:
		var out []string
		t := v.Type()
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			tag := f.Tag.Get("json")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" {
				continue
			}
			if f.Anonymous && name == "" {
				out = append(out, nilSlices(v.Field(i), path, seen)...)
				continue
			}
			if name == "" {
				name = f.Name
			}
			fv := v.Field(i)
			if fv.Kind() == reflect.Slice && fv.IsNil() && !strings.Contains(opts, "omitempty") && f.Type.Elem().Kind() != reflect.Uint8 {
				out = append(out, path+"."+name)
				continue
			}
			out = append(out, nilSlices(fv, path+"."+name, seen)...)
		}
		return out
	}
	return nil
}

// Every report, on every fixture and form, writes its lists as [] when
// they are empty, never null.
func TestReportsHaveNoNullLists(t *testing.T) {
	for _, sc := range append(healthyScenarios, "sync-failure-v1.37", "foreign-mark-v1.37", "legacy-leftovers-v1.37") {
		dir := fixture.Dir(sc)
		for _, form := range fixture.Forms(t, dir) {
			t.Run(sc+"/"+form.Name, func(t *testing.T) {
				n := node(t, dir, form)
				reports := map[string]any{
					"triage": diagnose.Triage(n), "explain": diagnose.ExplainServices(n), "counts": diagnose.Counts(n),
					"masq": diagnose.Masquerade(n), "stale": diagnose.Stale(n, diagnose.StaleOptions{}), "map": diagnose.MapChains(n),
				}
				if tr, err := diagnose.Trace(n, diagnose.TraceRequest{Dst: netip.MustParseAddrPort("10.96.0.10:53"), Protocol: "udp", From: "node", NodeIPs: []netip.Addr{netip.MustParseAddr("10.0.0.10")}}); err == nil {
					reports["trace"] = tr
				}
				for what, r := range reports {
					if nulls := nilSlices(reflect.ValueOf(r), what, map[uintptr]bool{}); len(nulls) > 0 {
						t.Errorf("%s writes null for %d lists, first %s", what, len(nulls), strings.Join(nulls[:min(5, len(nulls))], ", "))
					}
				}
			})
		}
	}
}
