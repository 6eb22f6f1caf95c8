package diagnose

import (
	"fmt"
	"slices"
	"sort"
	"strings"
)

// SweepSummary is what a sweep of many nodes found, in a few lines per node
// and per cause: the per-node reports themselves are streamed as the nodes
// finish and not kept, so a sweep's memory does not grow with its reports.
type SweepSummary struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	// Nodes swept, and how many could not be read.
	Nodes  int `json:"nodes"`
	Failed int `json:"failed"`
	// Status is the worst of the nodes'; a node that could not be read
	// makes the sweep incomplete.
	Status Status `json:"status"`
	// Rows are the nodes, worst first.
	Rows []SweepRow `json:"rows"`
	// Causes are the findings grouped across nodes: one line per cause,
	// with every node it was found on.
	Causes []SweepCause `json:"causes"`
	// Groups are the nodes that agree: the same causes (none for the
	// healthy ones), largest group first; nodes not read are left out.
	Groups []SweepGroup `json:"groups"`
}

// SweepGroup is nodes with the same findings.
type SweepGroup struct {
	Status Status   `json:"status"`
	Nodes  []string `json:"nodes"`
	// Causes are the titles of the findings they share.
	Causes []string `json:"causes"`
}

// SweepRow is one node of a sweep. Fields a command does not compute are
// left out (nil).
type SweepRow struct {
	Node             string `json:"node"`
	Status           Status `json:"status"`
	Mode             string `json:"mode,omitempty"`
	Backend          string `json:"backend,omitempty"`
	LargeClusterMode *bool  `json:"largeClusterMode,omitempty"`
	Stale            *int   `json:"stale,omitempty"`
	Harmful          *int   `json:"harmful,omitempty"`
	MissingEndpoints *int   `json:"missingEndpoints,omitempty"`
	ExtraEndpoints   *int   `json:"extraEndpoints,omitempty"`
	Masquerade       string `json:"masquerade,omitempty"`
	Drift            *int   `json:"drift,omitempty"`
	// ConntrackUse is the conntrack table's use in percent, StaleUDP its
	// stale UDP entries of Services, KernelSettings the settings that
	// break Services (conntrack_sweep.go).
	ConntrackUse   *int64   `json:"conntrackUsePercent,omitempty"`
	StaleUDP       *int     `json:"staleUDP,omitempty"`
	KernelSettings *int     `json:"kernelSettings,omitempty"`
	Errors         *int     `json:"errors,omitempty"`
	Warnings       *int     `json:"warnings,omitempty"`
	Seconds        float64  `json:"seconds"`
	Error          string   `json:"error,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	causes         []string // keys into the causes, for Summary
}

// SweepCause is one cause found on several nodes.
type SweepCause struct {
	Severity Severity `json:"severity"`
	Title    string   `json:"title"`
	Nodes    []string `json:"nodes"`
}

// NodeError is a sweep's item for a node that could not be read.
type NodeError struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Node       string `json:"node"`
	Error      string `json:"error"`
	// Reason: NotReady, NoKubeProxy, Forbidden, PodSecurity, ImagePull,
	// Timeout, NotFound, Interrupted or Other.
	Reason string `json:"reason"`
}

// Sweep gathers the rows and causes of a sweep as nodes finish. It is not
// safe for concurrent use: the sweep adds from one goroutine.
type Sweep struct {
	rows   []SweepRow
	causes map[string]*SweepCause
}

// NewSweep starts a summary.
func NewSweep() *Sweep { return &Sweep{causes: map[string]*SweepCause{}} }

// Add takes a node's report: a *TriageReport, *StaleReport, *RuleCounts,
// *MasqueradeReport, *TraceReport or *ServiceExplanation.
func (s *Sweep) Add(node string, report any, seconds float64) {
	a := &sweepAdd{sweep: s, row: SweepRow{Node: node, Seconds: seconds}}
	switch r := report.(type) {
	case *TriageReport:
		a.triage(r)
	case *StaleReport:
		a.stale(r)
	case *RuleCounts:
		a.counts(r)
	case *MasqueradeReport:
		a.masquerade(r)
	case *TraceReport:
		a.row.Status = r.Status
		for _, pt := range r.Traces {
			if sev, title, ok := traceCause(pt); ok {
				a.cause(sev, title)
			}
		}
	case *ServiceExplanation:
		a.explanation(r)
	case *ConntrackReport:
		a.row.Status = r.Status
		a.conntrack(r)
	}
	s.rows = append(s.rows, a.row)
}

// sweepAdd is one node's report being added: its row, and the sweep whose
// causes it adds to.
type sweepAdd struct {
	sweep *Sweep
	row   SweepRow
}

// cause records that the node has the cause, once per node.
func (a *sweepAdd) cause(sev Severity, title string) {
	node := a.row.Node
	key := string(sev) + "\x00" + title
	if !slices.Contains(a.row.causes, title) {
		a.row.causes = append(a.row.causes, title)
	}
	if a.sweep.causes[key] == nil {
		a.sweep.causes[key] = &SweepCause{Severity: sev, Title: title}
	}
	c := a.sweep.causes[key]
	if len(c.Nodes) == 0 || c.Nodes[len(c.Nodes)-1] != node {
		c.Nodes = append(c.Nodes, node)
	}
}

// endpointTally counts the endpoints missing from the rules and those the
// rules have extra; a problem that names none counts as one.
type endpointTally struct{ missing, extra int }

func (t *endpointTally) add(kind string, endpoints []string) {
	switch kind {
	case ProblemMissingEndpoints, ProblemRemovedJump:
		t.missing += max(len(endpoints), 1)
	case ProblemExtraEndpoints:
		t.extra += max(len(endpoints), 1)
	}
}

func (a *sweepAdd) triage(r *TriageReport) {
	row := &a.row
	row.Status, row.Mode = r.Status, string(r.Mode.Detected)
	stale, harmful := staleCounts(r.Stale)
	row.Stale, row.Harmful = &stale, &harmful
	errs, warns := r.Summary[SeverityError], r.Summary[SeverityWarning]
	row.Errors, row.Warnings = &errs, &warns
	var eps endpointTally
	for _, f := range r.Findings {
		if f.Severity != SeverityInfo {
			a.cause(f.Severity, findingTitle(f))
		}
		// A Service's problem counts whether it is a finding of its own
		// or a symptom of a cause.
		eps.add(f.Kind, f.Endpoints)
		for _, sym := range f.Symptoms {
			eps.add(sym.Kind, sym.Endpoints)
		}
	}
	row.MissingEndpoints, row.ExtraEndpoints = &eps.missing, &eps.extra
	row.Masquerade = masqueradeCell(r.Masquerade)
	if r.Counts != nil {
		drift := countsDrift(r.Counts)
		row.Drift = &drift
		row.LargeClusterMode = r.Counts.LargeClusterMode.FromDump
	}
	row.Backend = backendsOf(r.Masquerade)
	if r.Conntrack != nil {
		a.conntrackColumns(r.Conntrack) // its causes are triage's findings
	}
}

func (a *sweepAdd) stale(r *StaleReport) {
	row := &a.row
	row.Status = r.Status
	stale, harmful := staleCounts(r)
	row.Stale, row.Harmful = &stale, &harmful
	row.LargeClusterMode = anyTrue(r.LargeClusterMode)
	for _, g := range r.Groups {
		sev := SeverityInfo
		if g.Harmful {
			sev = SeverityError
		}
		if g.Harmful || !strings.HasPrefix(g.Title, "not due") {
			a.cause(sev, "stale: "+g.Title)
		}
	}
	a.staleIPVS(r)
}

func (a *sweepAdd) counts(r *RuleCounts) {
	row := &a.row
	row.Status, row.Mode = r.Status, string(r.Mode)
	drift := countsDrift(r)
	row.Drift = &drift
	row.LargeClusterMode = r.LargeClusterMode.FromDump
	for _, tc := range r.Tables {
		if tc.Compared && !tc.Agree {
			a.cause(SeverityWarning, fmt.Sprintf("rule count %s %s differs from the metric", tc.Family, tc.Table))
		}
	}
	for _, f := range r.Failures {
		a.cause(SeverityError, fmt.Sprintf("%s %s > 0: %s", f.Metric, f.Family, firstClause(f.Meaning)))
	}
	a.countsIPVS(r)
}

func (a *sweepAdd) masquerade(r *MasqueradeReport) {
	a.row.Status = r.Status
	a.row.Masquerade = masqueradeCell(r.Families)
	a.row.Backend = backendsOf(r.Families)
	for _, f := range r.Families {
		for _, p := range f.Problems {
			a.cause(SeverityError, fmt.Sprintf("masquerade %s %s: %s", f.Mode, f.Family, firstClause(p)))
		}
		for _, c := range f.Conflicts {
			a.cause(SeverityWarning, fmt.Sprintf("masquerade %s %s: %s uses an overlapping mark", f.Mode, f.Family, c.Owner))
		}
	}
}

func (a *sweepAdd) explanation(r *ServiceExplanation) {
	a.row.Status = r.Status
	var eps endpointTally
	for _, pp := range r.Ports {
		if a.row.Mode == "" {
			a.row.Mode = pp.Mode
		}
		for _, p := range pp.Problems {
			eps.add(p.Kind, p.Endpoints)
			if p.Severity != SeverityInfo {
				a.cause(p.Severity, fmt.Sprintf("%s (%s): %s", pp.ServicePort, pp.Family, p.Message))
			}
		}
	}
	a.row.MissingEndpoints, a.row.ExtraEndpoints = &eps.missing, &eps.extra
}

// AddError takes a node that could not be read.
func (s *Sweep) AddError(e NodeError, seconds float64) {
	s.rows = append(s.rows, SweepRow{Node: e.Node, Status: StatusIncomplete, Error: e.Error, Reason: e.Reason, Seconds: seconds})
	key := string(SeverityError) + "\x00not read: " + e.Reason
	if s.causes[key] == nil {
		s.causes[key] = &SweepCause{Severity: SeverityError, Title: "could not be read: " + e.Reason}
	}
	s.causes[key].Nodes = append(s.causes[key].Nodes, e.Node)
}

// Summary is the sweep so far: rows worst first (errors reading a node,
// then problems, incomplete, healthy; by node name within each), causes
// most severe and most widespread first.
func (s *Sweep) Summary() *SweepSummary {
	sum := &SweepSummary{APIVersion: APIVersion, Kind: "SweepSummary", Nodes: len(s.rows), Rows: append([]SweepRow{}, s.rows...), Causes: []SweepCause{}}
	rank := func(r SweepRow) int {
		switch {
		case r.Error != "":
			return 0
		case r.Status == StatusProblems:
			return 1
		case r.Status == StatusIncomplete:
			return 2
		}
		return 3
	}
	sort.SliceStable(sum.Rows, func(i, j int) bool {
		a, b := sum.Rows[i], sum.Rows[j]
		if rank(a) != rank(b) {
			return rank(a) < rank(b)
		}
		return a.Node < b.Node
	})
	problems, incomplete, read := false, false, 0
	for _, r := range sum.Rows {
		if r.Error != "" {
			sum.Failed++
			incomplete = true
			continue
		}
		read++
		problems = problems || r.Status == StatusProblems
		incomplete = incomplete || r.Status == StatusIncomplete
	}
	switch {
	case problems:
		sum.Status = StatusProblems
	case incomplete:
		sum.Status = StatusIncomplete
	default:
		sum.Status = StatusHealthy
	}
	for _, c := range s.causes {
		nodes := append([]string{}, c.Nodes...)
		sort.Strings(nodes)
		sum.Causes = append(sum.Causes, SweepCause{Severity: c.Severity, Title: c.Title, Nodes: nodes})
	}
	groups := map[string]*SweepGroup{}
	for _, r := range sum.Rows {
		if r.Error != "" {
			continue
		}
		causes := slices.Clone(r.causes)
		sort.Strings(causes)
		key := string(r.Status) + "\x00" + strings.Join(causes, "\x00")
		g := groups[key]
		if g == nil {
			g = &SweepGroup{Status: r.Status, Causes: append([]string{}, causes...)}
			groups[key] = g
		}
		g.Nodes = append(g.Nodes, r.Node)
	}
	sum.Groups = []SweepGroup{}
	for _, g := range groups {
		sort.Strings(g.Nodes)
		sum.Groups = append(sum.Groups, *g)
	}
	sort.Slice(sum.Groups, func(i, j int) bool {
		a, b := sum.Groups[i], sum.Groups[j]
		if len(a.Nodes) != len(b.Nodes) {
			return len(a.Nodes) > len(b.Nodes)
		}
		return a.Nodes[0] < b.Nodes[0]
	})
	sort.Slice(sum.Causes, func(i, j int) bool {
		a, b := sum.Causes[i], sum.Causes[j]
		if a.Severity.rank() != b.Severity.rank() {
			return a.Severity.rank() < b.Severity.rank()
		}
		if len(a.Nodes) != len(b.Nodes) {
			return len(a.Nodes) > len(b.Nodes)
		}
		return a.Title < b.Title
	})
	return sum
}

func staleCounts(r *StaleReport) (stale, harmful int) {
	if r == nil {
		return 0, 0
	}
	for _, c := range r.Chains {
		stale++
		if c.Referenced || c.Cause == StaleCauseBlockingLeftover {
			harmful++
		}
	}
	vs, vsHarmful := staleVirtualServers(r)
	return stale + vs, harmful + vsHarmful
}

func countsDrift(r *RuleCounts) int {
	n := ipvsDrift(r)
	for _, tc := range r.Tables {
		if tc.Compared && !tc.Agree {
			n++
		}
	}
	return n
}

func masqueradeCell(fams []MasqReport) string {
	var cells []string
	seen := map[string]bool{}
	for i := range fams {
		cell := fams[i].BitCell()
		if !seen[cell] {
			seen[cell] = true
			cells = append(cells, cell)
		}
	}
	return strings.Join(cells, ",")
}

func backendsOf(fams []MasqReport) string {
	var out []string
	seen := map[string]bool{}
	for _, f := range fams {
		if b := string(f.Backend); b != "" && !seen[b] {
			seen[b] = true
			out = append(out, b)
		}
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

func anyTrue(m map[string]bool) *bool {
	if len(m) == 0 {
		return nil
	}
	v := false
	for _, b := range m {
		v = v || b
	}
	return &v
}

// findingTitle is what a finding is across nodes: its cause's title, else
// its area and subject.
func findingTitle(f Finding) string {
	if f.Title != "" {
		return f.Title
	}
	return strings.TrimSpace(f.Area + " " + f.Subject + ": " + firstClause(f.Message))
}

// firstClause is a message up to its first colon or semicolon: what it is,
// without the explanation.
func firstClause(s string) string {
	cut := len(s)
	for _, sep := range []string{": ", "; "} {
		if i := strings.Index(s, sep); i > 0 && i < cut {
			cut = i
		}
	}
	return s[:cut]
}
