package ruleargs

import (
	"reflect"
	"testing"
)

func TestParseSpec(t *testing.T) {
	for _, tc := range []struct {
		text string
		want Spec
	}{
		{`-s 10.244.0.1/32 -j KUBE-MARK-MASQ`, Spec{Matches: []Match{{Options: []Option{{Name: "-s", Args: []string{"10.244.0.1/32"}}}}}, Target: "KUBE-MARK-MASQ"}},
		// kube-proxy's masquerade rule: a negated source, the comment
		// quoted whole, the implicit tcp module of -p tcp.
		{`! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "ns/a:http cluster IP" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
			Spec{Matches: []Match{
				{Options: []Option{{Name: "-s", Not: true, Args: []string{"10.244.0.0/16"}}, {Name: "-d", Args: []string{"10.96.0.1/32"}}, {Name: "-p", Args: []string{"tcp"}}}},
				{Module: "comment", Options: []Option{{Name: "--comment", Args: []string{"ns/a:http cluster IP"}}}},
				{Module: "tcp", Options: []Option{{Name: "--dport", Args: []string{"80"}}}},
			}, Target: "KUBE-MARK-MASQ"}},
		{`-m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
			Spec{Matches: []Match{{}, {Module: "conntrack", Options: []Option{{Name: "--ctstate", Not: true, Args: []string{"RELATED,ESTABLISHED,DNAT"}}}}}, Target: "DROP"}},
		{`-m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT`,
			Spec{Matches: []Match{{}, {Module: "set", Options: []Option{{Name: "--match-set", Args: []string{"KUBE-CLUSTER-IP", "dst,dst"}}}}}, Target: "ACCEPT"}},
		{`-m recent --rcheck --seconds 10800 --reap --name KUBE-SEP-X --mask 255.255.255.255 --rsource -j KUBE-SEP-X`,
			Spec{Matches: []Match{{}, {Module: "recent", Options: []Option{{Name: "--rcheck"}, {Name: "--seconds", Args: []string{"10800"}}, {Name: "--reap"},
				{Name: "--name", Args: []string{"KUBE-SEP-X"}}, {Name: "--mask", Args: []string{"255.255.255.255"}}, {Name: "--rsource"}}}}, Target: "KUBE-SEP-X"}},
		{`-p tcp -j DNAT --to-destination 10.244.0.1:8080`,
			Spec{Matches: []Match{{Options: []Option{{Name: "-p", Args: []string{"tcp"}}}}}, Target: "DNAT", TargetOptions: []Option{{Name: "--to-destination", Args: []string{"10.244.0.1:8080"}}}}},
		{`-g KUBE-SVC-X`, Spec{Matches: []Match{{}}, Target: "KUBE-SVC-X", Goto: true}},
		{`[12:34] -j ACCEPT`, Spec{Matches: []Match{{}}, Target: "ACCEPT"}},
		// -p tcp --dport 80, no -m tcp: iptables loads tcp implicitly.
		{`-p tcp --dport 80 -j ACCEPT`, Spec{Matches: []Match{{Options: []Option{{Name: "-p", Args: []string{"tcp"}}}}, {Module: "tcp", Options: []Option{{Name: "--dport", Args: []string{"80"}}}}}, Target: "ACCEPT"}},
	} {
		got, err := ParseSpec(tc.text)
		if err != nil {
			t.Errorf("%s: %v", tc.text, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s:\n got %+v\nwant %+v", tc.text, got, tc.want)
		}
	}
	for _, bad := range []string{`-j`, `-m`, `-s 10.0.0.1 !`, `stray -j ACCEPT`, `-m comment --comment "unterminated`} {
		if _, err := ParseSpec(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func FuzzParseSpec(f *testing.F) {
	for _, s := range []string{`! -s 10.244.0.0/16 -d 10.96.0.1/32 -p tcp -m comment --comment "x y" -m tcp --dport 80 -j KUBE-MARK-MASQ`,
		`-m statistic --mode random --probability 0.33333333349 -j KUBE-SEP-X`, `[1:2] -c 3 4 -j DNAT --to-destination [fd00::1]:80`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := ParseSpec(s)
		if err != nil {
			return
		}
		if len(spec.Matches) == 0 {
			t.Fatalf("%q: no builtin match group", s)
		}
		for _, m := range spec.Matches {
			for _, o := range m.Options {
				if o.Name == "" || o.Name[0] != '-' {
					t.Fatalf("%q: option %+v", s, o)
				}
			}
		}
	})
}
