package ipset

import "testing"

// IsIPSetLine takes the lines only an ipset listing prints, and no line of
// a knftables dump (which starts with create and add too), iptables or
// IPVS.
func TestIsIPSetLine(t *testing.T) {
	tests := []struct {
		line string
		want bool
	}{
		{"create KUBE-CLUSTER-IP hash:ip,port family inet hashsize 1024 maxelem 65536 bucketsize 12 initval 0xcaaecbf1", true},
		{"create KUBE-NODE-PORT-TCP bitmap:port range 0-65535", true},
		{"add KUBE-CLUSTER-IP 10.96.10.6,tcp:80", true},
		{"add KUBE-6-IPVS-IPS fd00:10:96::c", true},
		{"add KUBE-NODE-PORT-TCP 30081", true},
		{"  add KUBE-LOAD-BALANCER-SOURCE-CIDR 198.51.100.10,tcp:443,10.0.0.0/8\r", true},
		{"Type: hash:ip,port", true},
		{"Header: family inet6 hashsize 1024 maxelem 65536 bucketsize 12 initval 0xab4d3fb9", true},
		{"Header: range 0-65535", true},
		{"Number of entries: 20", true},
		{"Size in memory: 8264", true},
		{"[root@node-a ~]# ipset list KUBE-CLUSTER-IP", true},
		{"$ sudo /usr/sbin/ipset save", true},
		{"ipset -L", true},
		// knftables dumps
		{"add table ip kube-proxy { comment \"rules for kube-proxy\" ; }", false},
		{"add chain ip kube-proxy cluster-ips-check", false},
		{"add element ip kube-proxy cluster-ips { 10.96.0.10 }", false},
		{"add rule ip kube-proxy services ip daddr . meta l4proto . th dport vmap @service-ips", false},
		{"create table ip kube-proxy", false},
		{"create set ip kube-proxy cluster-ips { type ipv4_addr ; }", false},
		{"add map ip kube-proxy service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }", false},
		// others
		{"-A KUBE-SERVICES -m set --match-set KUBE-CLUSTER-IP dst,dst -j ACCEPT", false},
		{"TCP  10.96.0.1:443 rr", false},
		{"Name: KUBE-CLUSTER-IP", false}, // kubectl describe prints Name: too
		{"Type: ClusterIP", false},
		{"Members:", false},
		{"the ipset tool", false},
		{"", false},
	}
	for _, tc := range tests {
		if got := IsIPSetLine(tc.line); got != tc.want {
			t.Errorf("IsIPSetLine(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}
