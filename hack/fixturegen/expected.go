package main

// expected.json: which Service port / endpoint every kube-proxy chain belongs to,
// derived from kube-proxy's own output (rule comments, the jump graph, DNAT
// targets, the readable nftables chain names). The chain-name hash is only
// recomputed as a cross-check: a mismatch aborts generation.

import (
	"bytes"
	"crypto/sha256"
	"encoding/base32"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"sigs.k8s.io/knftables"
)

type ExpectedChain struct {
	Mode        string `json:"mode"`
	Family      string `json:"family"`
	Table       string `json:"table"`
	Chain       string `json:"chain"`
	Kind        string `json:"kind"`
	ServicePort string `json:"servicePort"`
	Protocol    string `json:"protocol"`
	Endpoint    string `json:"endpoint,omitempty"`
	Stale       bool   `json:"stale"`
}

func writeExpected(sc *Scenario, out string) error {
	var all []ExpectedChain
	for _, mode := range sc.Modes {
		for _, fam := range []string{"ipv4", "ipv6"} {
			family := "IPv4"
			if fam == "ipv6" {
				family = "IPv6"
			}
			switch mode {
			case "iptables":
				final, err := os.ReadFile(filepath.Join(out, "iptables", "restore-"+fam+".txt"))
				if err != nil {
					return err
				}
				// Earlier states (churn scenarios) are extra evidence for
				// chains that linger after kube-proxy stopped referencing them.
				var history []string
				if h, err := os.ReadFile(filepath.Join(out, "iptables", "restore-"+fam+".sync1.txt")); err == nil {
					history = append(history, string(h))
				}
				// Chains kube-proxy deleted (-X) in a restore that failed
				// are stale in its own view, even though they are still
				// in the kernel, reachable through rules it failed to
				// replace.
				deleted := map[string]bool{}
				if f, err := os.ReadFile(filepath.Join(out, "iptables", "failed-restore-"+fam+".txt")); err == nil {
					for _, l := range strings.Split(string(f), "\n") {
						if name, ok := strings.CutPrefix(l, "-X "); ok {
							deleted[strings.TrimSpace(name)] = true
						}
					}
				}
				chains, err := iptablesExpected(family, string(final), history, deleted)
				if err != nil {
					return fmt.Errorf("iptables %s: %w", family, err)
				}
				all = append(all, chains...)
			case "nftables":
				dump, err := os.ReadFile(filepath.Join(out, "nftables", "knftables-"+fam+".txt"))
				if err != nil {
					return err
				}
				rs, err := os.ReadFile(filepath.Join(out, "nftables", "ruleset.json"))
				if err != nil {
					return err
				}
				chains, err := nftablesExpected(family, string(dump), rs)
				if err != nil {
					return fmt.Errorf("nftables %s: %w", family, err)
				}
				all = append(all, chains...)
			}
		}
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := all[i], all[j]
		if a.Mode != b.Mode {
			return a.Mode < b.Mode
		}
		if a.Family != b.Family {
			return a.Family < b.Family
		}
		if a.Table != b.Table {
			return a.Table < b.Table
		}
		return a.Chain < b.Chain
	})
	// One chain per line: valid JSON, compact, diff-friendly.
	var buf bytes.Buffer
	buf.WriteString("{\"chains\":[\n")
	for i, c := range all {
		b, err := json.Marshal(c)
		if err != nil {
			return err
		}
		buf.Write(b)
		if i < len(all)-1 {
			buf.WriteString(",")
		}
		buf.WriteString("\n")
	}
	buf.WriteString("]}\n")
	if err := checkMeta(out, all); err != nil {
		return fmt.Errorf("meta.json: %w", err)
	}
	return writeFile(filepath.Join(out, "expected.json"), buf.Bytes())
}

// checkMeta cross-checks the optional meta.json fields against the dumps and
// expected.json, so that they say only what the fixture shows.
func checkMeta(out string, all []ExpectedChain) error {
	b, err := os.ReadFile(filepath.Join(out, "meta.json"))
	if err != nil {
		return err
	}
	var m meta
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	key := func(mode, family, table, chain string) string { return mode + " " + family + " " + table + " " + chain }
	byKey := map[string]ExpectedChain{}
	for _, e := range all {
		byKey[key(e.Mode, e.Family, e.Table, e.Chain)] = e
	}

	// staleChains: exactly the nftables chains expected.json calls stale
	if len(m.StaleChains) > 0 {
		want := map[string]bool{}
		for _, c := range m.StaleChains {
			want[key(c.Mode, c.Family, c.Table, c.Chain)] = true
		}
		for _, e := range all {
			k := key(e.Mode, e.Family, e.Table, e.Chain)
			if e.Mode == "nftables" && e.Stale != want[k] {
				return fmt.Errorf("staleChains and expected.json disagree on %s", k)
			}
			delete(want, k)
		}
		for k := range want {
			return fmt.Errorf("staleChains: %s not in expected.json", k)
		}
	}

	// leftoverChains: in expected.json, stale, same owner
	for _, l := range m.LeftoverChains {
		e, ok := byKey[key(l.Mode, l.Family, l.Table, l.Chain)]
		if !ok {
			return fmt.Errorf("leftover chain %s not in expected.json", l.Chain)
		}
		if !e.Stale || e.Kind != l.Kind || e.ServicePort != l.ServicePort || e.Protocol != l.Protocol {
			return fmt.Errorf("leftover chain %s: expected.json says %+v", l.Chain, e)
		}
	}

	// foreignMarkRules: verbatim in what the real tools print
	lines := func(files ...string) (map[string]bool, error) {
		set := map[string]bool{}
		for _, f := range files {
			b, err := os.ReadFile(filepath.Join(out, f))
			if err != nil {
				return nil, err
			}
			for _, l := range strings.Split(string(b), "\n") {
				set[strings.TrimSpace(l)] = true
			}
		}
		return set, nil
	}
	for _, r := range m.ForeignMarkRules {
		var files []string
		switch r.Mode {
		case "iptables":
			fam := "ipv4"
			if r.Family == "IPv6" {
				fam = "ipv6"
			}
			files = []string{"iptables/save-nft-" + fam + ".txt", "iptables/save-legacy-" + fam + ".txt", "iptables/restore-" + fam + ".txt"}
		case "nftables":
			files = []string{"nftables/ruleset.txt"}
		}
		for _, f := range files {
			set, err := lines(f)
			if err != nil {
				return err
			}
			if !set[r.Rule] {
				return fmt.Errorf("foreign rule %q not found in %s", r.Rule, f)
			}
		}
	}
	return nil
}

// ---------------------------------------------------------------------------
// iptables

type iptRule struct {
	table, chain string
	comment      string
	proto        string
	target       string
	toDest       string
}

type iptDump struct {
	chains map[string][]string // table -> chain names in declaration order
	rules  []iptRule
}

// splitArgs splits an iptables-restore line into words; "..." is one word.
func splitArgs(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inQuote, have := false, false
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '"':
			inQuote = !inQuote
			have = true
		case c == ' ' && !inQuote:
			if have {
				words = append(words, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteByte(c)
			have = true
		}
	}
	if inQuote {
		return nil, fmt.Errorf("unterminated quote in %q", line)
	}
	if have {
		words = append(words, cur.String())
	}
	return words, nil
}

func parseIPTables(text string) (*iptDump, error) {
	d := &iptDump{chains: map[string][]string{}}
	table := ""
	for _, line := range strings.Split(text, "\n") {
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case line == "COMMIT":
			table = ""
		case strings.HasPrefix(line, ":"):
			d.chains[table] = append(d.chains[table], strings.Fields(line[1:])[0])
		case strings.HasPrefix(line, "-X "):
			// chain deleted in this restore: drop it
			name := strings.TrimSpace(line[3:])
			var keep []string
			for _, c := range d.chains[table] {
				if c != name {
					keep = append(keep, c)
				}
			}
			d.chains[table] = keep
		case strings.HasPrefix(line, "-A "):
			w, err := splitArgs(line)
			if err != nil {
				return nil, err
			}
			r := iptRule{table: table, chain: w[1]}
			for i := 2; i < len(w); i++ {
				next := ""
				if i+1 < len(w) {
					next = w[i+1]
				}
				switch w[i] {
				case "--comment":
					r.comment = next
				case "-p":
					r.proto = next
				case "-j", "-g":
					r.target = next
				case "--to-destination":
					r.toDest = next
				}
			}
			d.rules = append(d.rules, r)
		default:
			return nil, fmt.Errorf("unexpected line %q", line)
		}
	}
	return d, nil
}

var iptKinds = []struct{ prefix, kind string }{
	{"KUBE-SVC-", "service"},
	{"KUBE-SVL-", "local"},
	{"KUBE-EXT-", "external"},
	{"KUBE-FW-", "firewall"},
	{"KUBE-SEP-", "endpoint"},
	// kube-proxy <= 1.23's externalTrafficPolicy: Local chain (replaced by
	// KUBE-EXT/KUBE-SVL in 1.24); only found as a leftover
	{"KUBE-XLB-", "local"},
}

func iptKind(chain string) string {
	for _, k := range iptKinds {
		if strings.HasPrefix(chain, k.prefix) {
			return k.kind
		}
	}
	return "fixed"
}

var spnRE = `([a-z0-9][-a-z0-9.]*/[a-z0-9][-a-z0-9.]*(?::[-a-z0-9]+)?)`

var commentPatterns = []*regexp.Regexp{
	regexp.MustCompile(`^` + spnRE + ` (?:cluster IP|external IP|loadbalancer IP|has no endpoints|has no local endpoints|health check node port)$`),
	regexp.MustCompile(`^` + spnRE + ` traffic not accepted by KUBE-FW-\S+$`),
	regexp.MustCompile(`^(?:masquerade|pod|masquerade LOCAL|route LOCAL) traffic for ` + spnRE + ` external destinations$`),
	regexp.MustCompile(`^other traffic to ` + spnRE + ` will be dropped by KUBE-PROXY-FIREWALL$`),
	// kube-proxy <= 1.23, KUBE-XLB chains
	regexp.MustCompile(`^(?:masquerade|route) LOCAL traffic for ` + spnRE + ` LB IP(?: to service chain)?$`),
	regexp.MustCompile(`^` + spnRE + `$`),
}

var arrowPattern = regexp.MustCompile(`^` + spnRE + ` -> (\S+)$`)

// commentSPN returns the service port name in a kube-proxy comment and, for
// the "<spn> -> <endpoint>" form, the endpoint.
func commentSPN(c string) (spn, ep string) {
	if m := arrowPattern.FindStringSubmatch(c); m != nil {
		return m[1], m[2]
	}
	for _, re := range commentPatterns {
		if m := re.FindStringSubmatch(c); m != nil {
			return m[1], ""
		}
	}
	return "", ""
}

type facts struct {
	spn, proto, ep map[string]map[string]bool // chain -> value set
	pendingProto   [][2]string
}

func newFacts() *facts {
	return &facts{spn: map[string]map[string]bool{}, proto: map[string]map[string]bool{}, ep: map[string]map[string]bool{}}
}

func addFact(m map[string]map[string]bool, chain, v string) bool {
	if v == "" {
		return false
	}
	if m[chain] == nil {
		m[chain] = map[string]bool{}
	}
	if m[chain][v] {
		return false
	}
	m[chain][v] = true
	return true
}

func single(m map[string]bool) (string, error) {
	if len(m) != 1 {
		var vs []string
		for v := range m {
			vs = append(vs, v)
		}
		sort.Strings(vs)
		return "", fmt.Errorf("%d candidates %v", len(vs), vs)
	}
	for v := range m {
		return v, nil
	}
	return "", nil
}

// collect gathers evidence from one dump.
func (f *facts) collect(d *iptDump) {
	type edge struct{ from, to string }
	var edges []edge
	for _, r := range d.rules {
		if r.table != "nat" && r.table != "filter" {
			continue
		}
		spn, ep := commentSPN(r.comment)
		proto := strings.ToUpper(r.proto)
		if iptKind(r.chain) != "fixed" {
			// comments and protocol matches in a per-service chain are about
			// that chain's own service port
			addFact(f.spn, r.chain, spn)
			addFact(f.proto, r.chain, proto)
			if iptKind(r.chain) == "endpoint" && r.target == "DNAT" {
				addFact(f.ep, r.chain, r.toDest)
			}
		}
		if r.target != "" && iptKind(r.target) != "fixed" {
			// a jump rule's comment / -p describe the service port it
			// dispatches to ("ns/svc:p cluster IP" -j KUBE-SVC-..., "ns/svc:p -> ip:port" -j KUBE-SEP-...)
			addFact(f.spn, r.target, spn)
			addFact(f.proto, r.target, proto)
			if ep != "" {
				addFact(f.ep, r.target, ep)
			}
			if iptKind(r.chain) != "fixed" {
				edges = append(edges, edge{r.chain, r.target})
			}
		}
	}
	// propagate along jumps between per-service chains (FW->EXT->SVC/SVL->SEP)
	for changed := true; changed; {
		changed = false
		for _, e := range edges {
			for v := range f.spn[e.from] {
				changed = addFact(f.spn, e.to, v) || changed
			}
			for v := range f.proto[e.from] {
				changed = addFact(f.proto, e.to, v) || changed
			}
		}
	}
	// A chain with no protocol evidence of its own (a v1.23 KUBE-XLB chain
	// has no -p match and nothing jumps to it) takes the protocol of the
	// per-service chains it jumps to.
	for _, e := range edges {
		if len(f.proto[e.from]) == 0 && iptKind(e.to) != "endpoint" {
			for v := range f.proto[e.to] {
				f.pendingProto = append(f.pendingProto, [2]string{e.from, v})
			}
		}
	}
	for _, p := range f.pendingProto {
		addFact(f.proto, p[0], p[1])
	}
	f.pendingProto = nil
}

func b32hash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return base32.StdEncoding.EncodeToString(sum[:])[:n]
}

func iptablesExpected(family, final string, history []string, deleted map[string]bool) ([]ExpectedChain, error) {
	d, err := parseIPTables(final)
	if err != nil {
		return nil, err
	}
	f := newFacts()
	f.collect(d)
	for _, h := range history {
		hd, err := parseIPTables(h)
		if err != nil {
			return nil, err
		}
		f.collect(hd)
	}

	// reachability from the built-in chains, per table
	jumps := map[string][]string{}
	for _, r := range d.rules {
		if r.target != "" {
			jumps[r.table+"/"+r.chain] = append(jumps[r.table+"/"+r.chain], r.target)
		}
	}
	reach := map[string]bool{}
	var walk func(table, chain string)
	walk = func(table, chain string) {
		k := table + "/" + chain
		if reach[k] {
			return
		}
		reach[k] = true
		for _, t := range jumps[k] {
			walk(table, t)
		}
	}
	for _, table := range []string{"nat", "filter"} {
		for _, c := range []string{"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"} {
			walk(table, c)
		}
	}

	var out []ExpectedChain
	for _, table := range []string{"nat", "filter"} {
		for _, c := range d.chains[table] {
			if !strings.HasPrefix(c, "KUBE-") {
				continue
			}
			e := ExpectedChain{Mode: "iptables", Family: family, Table: table, Chain: c, Kind: iptKind(c)}
			if e.Kind != "fixed" {
				if e.ServicePort, err = single(f.spn[c]); err != nil {
					return nil, fmt.Errorf("%s %s: service port: %w", table, c, err)
				}
				if e.Protocol, err = single(f.proto[c]); err != nil {
					return nil, fmt.Errorf("%s %s: protocol: %w", table, c, err)
				}
				e.Stale = !reach[table+"/"+c] || deleted[c]
				// cross-check with kube-proxy's naming scheme
				want := ""
				if e.Kind == "endpoint" {
					if e.Endpoint, err = single(f.ep[c]); err != nil {
						return nil, fmt.Errorf("%s %s: endpoint: %w", table, c, err)
					}
					want = "KUBE-SEP-" + b32hash(e.ServicePort+strings.ToLower(e.Protocol)+e.Endpoint, 16)
				} else {
					want = c[:strings.LastIndex(c, "-")+1] + b32hash(e.ServicePort+strings.ToLower(e.Protocol), 16)
				}
				if want != c {
					return nil, fmt.Errorf("%s %s: derived %s/%s/%s but the name hash says %s", table, c, e.ServicePort, e.Protocol, e.Endpoint, want)
				}
			}
			out = append(out, e)
		}
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// nftables

var nftKinds = []struct{ prefix, kind string }{
	{"service-", "service"},
	{"local-", "local"},
	{"external-", "external"},
	{"firewall-", "firewall"},
	{"endpoint-", "endpoint"},
}

var (
	nftRefRE  = regexp.MustCompile(`\b(?:jump|goto) ([^\s,{}]+)`)
	nftDNATRE = regexp.MustCompile(`\bdnat (?:ip6? )?to (\S+)`)
)

func nftablesExpected(family, dump string, rulesetJSON []byte) ([]ExpectedChain, error) {
	fam := knftables.IPv4Family
	if family == "IPv6" {
		fam = knftables.IPv6Family
	}
	fake := knftables.NewFake(fam, "kube-proxy")
	if err := fake.ParseDump(dump); err != nil {
		return nil, fmt.Errorf("ParseDump: %w", err)
	}
	if fake.Table == nil {
		return nil, fmt.Errorf("no table in dump")
	}
	refs := nftReferences(fake.Table)
	// the same chains must be in the kernel (nft -j list ruleset)
	kernel, err := kernelChains(rulesetJSON, string(fam))
	if err != nil {
		return nil, err
	}

	var out []ExpectedChain
	for name, ch := range fake.Table.Chains {
		if !kernel[name] {
			return nil, fmt.Errorf("chain %s is in the knftables dump but not in the kernel ruleset", name)
		}
		delete(kernel, name)
		e := ExpectedChain{Mode: "nftables", Family: family, Table: "kube-proxy", Chain: name, Kind: "fixed"}
		for _, k := range nftKinds {
			if strings.HasPrefix(name, k.prefix) && strings.Contains(name, "/") {
				e.Kind = k.kind
				if err := nftServiceChain(&e, k.prefix, ch); err != nil {
					return nil, err
				}
				e.Stale = !refs[name]
			}
		}
		out = append(out, e)
	}
	for name := range kernel {
		return nil, fmt.Errorf("chain %s is in the kernel but not in the knftables dump", name)
	}
	return out, nil
}

// nftReferences are the chains something jumps to or goes to, from a rule
// or a verdict-map element: the others are stale.
func nftReferences(t *knftables.FakeTable) map[string]bool {
	refs := map[string]bool{}
	for _, ch := range t.Chains {
		for _, r := range ch.Rules {
			for _, m := range nftRefRE.FindAllStringSubmatch(r.Rule, -1) {
				refs[m[1]] = true
			}
		}
	}
	for _, m := range t.Maps {
		for _, el := range m.Elements {
			for _, m := range nftRefRE.FindAllStringSubmatch(strings.Join(el.Value, " "), -1) {
				refs[m[1]] = true
			}
		}
	}
	return refs
}

// nftServiceChain fills e (Kind set) from a per-service chain's readable
// name, <prefix><hash8>-<ns>/<name>/<proto>/<port>[__<ip>/<port>],
// checking the name's hash and, for an endpoint chain, its DNAT rule.
func nftServiceChain(e *ExpectedChain, prefix string, ch *knftables.FakeChain) error {
	name := e.Chain
	rest := name[len(prefix):]
	if len(rest) < 10 || rest[8] != '-' {
		return fmt.Errorf("unexpected chain name %q", name)
	}
	hash, base := rest[:8], rest[9:]
	if strings.HasSuffix(base, "...") {
		return fmt.Errorf("truncated chain name %q not handled", name)
	}
	if b32hash(base, 8) != hash {
		return fmt.Errorf("chain %s: name hash mismatch", name)
	}
	svcPart, epPart, isEP := strings.Cut(base, "__")
	parts := strings.Split(svcPart, "/")
	if len(parts) != 4 {
		return fmt.Errorf("unexpected chain name %q", name)
	}
	e.ServicePort = parts[0] + "/" + parts[1]
	if parts[3] != "" {
		e.ServicePort += ":" + parts[3]
	}
	e.Protocol = strings.ToUpper(parts[2])
	if e.Kind != "endpoint" {
		return nil
	}
	if !isEP {
		return fmt.Errorf("endpoint chain %q without endpoint part", name)
	}
	return nftEndpoint(e, epPart, ch)
}

// nftEndpoint sets an endpoint chain's endpoint from kube-proxy's own DNAT
// rule, cross-checked with the readable name (IPv6 ':' written as '.').
func nftEndpoint(e *ExpectedChain, epPart string, ch *knftables.FakeChain) error {
	name := e.Chain
	for _, r := range ch.Rules {
		if m := nftDNATRE.FindStringSubmatch(r.Rule); m != nil {
			e.Endpoint = m[1]
		}
	}
	ip, p, _ := strings.Cut(epPart, "/")
	if e.Family == "IPv6" {
		ip = strings.ReplaceAll(ip, ".", ":")
	}
	switch {
	case e.Endpoint == "" && len(ch.Rules) == 0:
		// flushed by kube-proxy (stale, deleted by a later sync): only
		// the name is left
		e.Endpoint = net.JoinHostPort(ip, p)
	case e.Endpoint == "":
		return fmt.Errorf("endpoint chain %s has no dnat rule", name)
	case net.JoinHostPort(ip, p) != e.Endpoint:
		return fmt.Errorf("endpoint chain %s: dnat to %s", name, e.Endpoint)
	}
	return nil
}

func kernelChains(rulesetJSON []byte, family string) (map[string]bool, error) {
	var rs struct {
		Nftables []map[string]json.RawMessage `json:"nftables"`
	}
	if err := json.Unmarshal(rulesetJSON, &rs); err != nil {
		return nil, err
	}
	out := map[string]bool{}
	for _, o := range rs.Nftables {
		raw, ok := o["chain"]
		if !ok {
			continue
		}
		var c struct {
			Family, Table, Name string
		}
		if err := json.Unmarshal(raw, &c); err != nil {
			return nil, err
		}
		if c.Family == family && c.Table == "kube-proxy" {
			out[c.Name] = true
		}
	}
	return out, nil
}

// ---------------------------------------------------------------------------

// validate checks that the knftables dumps are accepted by
// knftables.NewFake(family, "kube-proxy").ParseDump and that the restore
// dumps parse.
func validate(out string) error {
	for _, fam := range []struct {
		file string
		f    knftables.Family
	}{{"knftables-ipv4.txt", knftables.IPv4Family}, {"knftables-ipv6.txt", knftables.IPv6Family}} {
		p := filepath.Join(out, "nftables", fam.file)
		b, err := os.ReadFile(p)
		if os.IsNotExist(err) {
			continue
		} else if err != nil {
			return err
		}
		fake := knftables.NewFake(fam.f, "kube-proxy")
		if err := fake.ParseDump(string(b)); err != nil {
			return fmt.Errorf("%s: ParseDump: %w", p, err)
		}
		if fake.Dump() != string(b) {
			return fmt.Errorf("%s: ParseDump+Dump does not round-trip", p)
		}
	}
	return nil
}
