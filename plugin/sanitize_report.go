package plugin

import (
	"reflect"
	"sync"
)

// escapeReport escapes, with escapeData, every string a report holds
// before the text renderers set it among their own lines and styles: the
// names, messages and rules in a report come from files and the cluster,
// and the plugin's own words in it never hold a control character. report
// is a pointer; what it points to is changed in place, and what it shares
// with others (the objects, another node's report) is copied where a
// string changes, never written.
func escapeReport(report any) {
	v := reflect.ValueOf(report)
	if v.Kind() != reflect.Pointer || v.IsNil() || !v.Elem().CanSet() {
		return
	}
	if c, changed := escapeValue(v.Elem(), 0); changed {
		v.Elem().Set(c)
	}
}

// maxEscapeDepth stops a walk that would not end (a report is a tree that
// JSON encodes, so none should come near it).
const maxEscapeDepth = 200

// escapeValue is v with its exported strings escaped, and whether one
// changed; v itself is never written.
func escapeValue(v reflect.Value, depth int) (reflect.Value, bool) {
	if depth > maxEscapeDepth || !holdsStrings(v.Type()) {
		return v, false
	}
	switch v.Kind() {
	case reflect.String:
		if s := v.String(); needsEscapeData(s) {
			if e := escapeData(s); e != s {
				n := reflect.New(v.Type()).Elem()
				n.SetString(e)
				return n, true
			}
		}
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return v, false
		}
		c, changed := escapeValue(v.Elem(), depth+1)
		if !changed {
			return v, false
		}
		if v.Kind() == reflect.Pointer {
			n := reflect.New(v.Type().Elem())
			n.Elem().Set(c)
			return n, true
		}
		n := reflect.New(v.Type()).Elem()
		n.Set(c)
		return n, true
	case reflect.Struct:
		if c, changed := escapeFields(v, depth); changed {
			return c, true
		}
	case reflect.Slice, reflect.Array:
		if c, changed := escapeElems(v, depth); changed {
			return c, true
		}
	case reflect.Map:
		return escapeMap(v, depth)
	}
	return v, false
}

func escapeFields(v reflect.Value, depth int) (reflect.Value, bool) {
	var out reflect.Value
	for i := 0; i < v.NumField(); i++ {
		if !v.Type().Field(i).IsExported() {
			continue
		}
		c, changed := escapeValue(v.Field(i), depth+1)
		if !changed {
			continue
		}
		if !out.IsValid() {
			out = reflect.New(v.Type()).Elem()
			out.Set(v)
		}
		out.Field(i).Set(c)
	}
	return out, out.IsValid()
}

func escapeElems(v reflect.Value, depth int) (reflect.Value, bool) {
	var out reflect.Value
	for i := 0; i < v.Len(); i++ {
		c, changed := escapeValue(v.Index(i), depth+1)
		if !changed {
			continue
		}
		if !out.IsValid() {
			if v.Kind() == reflect.Slice {
				out = reflect.MakeSlice(v.Type(), v.Len(), v.Len())
				reflect.Copy(out, v)
			} else {
				out = reflect.New(v.Type()).Elem()
				out.Set(v)
			}
		}
		out.Index(i).Set(c)
	}
	return out, out.IsValid()
}

func escapeMap(v reflect.Value, depth int) (reflect.Value, bool) {
	if v.IsNil() {
		return v, false
	}
	type entry struct{ k, v reflect.Value }
	var entries []entry
	changed := false
	for it := v.MapRange(); it.Next(); {
		k, kc := escapeValue(it.Key(), depth+1)
		e, ec := escapeValue(it.Value(), depth+1)
		changed = changed || kc || ec
		entries = append(entries, entry{k, e})
	}
	if !changed {
		return v, false
	}
	out := reflect.MakeMapWithSize(v.Type(), len(entries))
	for _, e := range entries {
		out.SetMapIndex(e.k, e.v)
	}
	return out, true
}

// stringTypes caches holdsStrings: a report of 100,000 chains is walked
// without looking into its numbers, times and addresses.
var stringTypes sync.Map // reflect.Type → bool

// holdsStrings says whether a value of t may hold a string an exported
// path reaches.
func holdsStrings(t reflect.Type) bool {
	if known, ok := stringTypes.Load(t); ok {
		return known.(bool)
	}
	stringTypes.Store(t, true) // a type that holds itself: assume so while looking
	holds := false
	switch t.Kind() {
	case reflect.String, reflect.Interface:
		holds = true
	case reflect.Pointer, reflect.Slice, reflect.Array:
		holds = holdsStrings(t.Elem())
	case reflect.Map:
		holds = holdsStrings(t.Key()) || holdsStrings(t.Elem())
	case reflect.Struct:
		for i := 0; i < t.NumField() && !holds; i++ {
			holds = t.Field(i).IsExported() && holdsStrings(t.Field(i).Type)
		}
	}
	stringTypes.Store(t, holds)
	return holds
}
