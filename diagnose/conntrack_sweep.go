package diagnose

// conntrack adds a conntrack report's row and causes to a sweep.
func (a *sweepAdd) conntrack(r *ConntrackReport) {
	a.conntrackColumns(r)
	for _, p := range r.Problems {
		if p.Severity != SeverityInfo {
			a.cause(p.Severity, conntrackTitle(p))
		}
	}
}

// conntrackColumns are the conntrack columns of a sweep's row, the same in
// triage's and conntrack's sweeps.
func (a *sweepAdd) conntrackColumns(r *ConntrackReport) {
	row := &a.row
	row.ConntrackUse = r.Summary.UsePercent
	stale, settings := r.Summary.StaleUDP, r.Summary.Settings
	row.StaleUDP, row.KernelSettings = &stale, &settings
}
