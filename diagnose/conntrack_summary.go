package diagnose

// ConntrackSummary is a conntrack report in a few numbers.
type ConntrackSummary struct {
	// Count and Max are nf_conntrack_count and nf_conntrack_max (nil
	// when the sysctls were not read), UsePercent count of max.
	Count      *int64 `json:"count,omitempty"`
	Max        *int64 `json:"max,omitempty"`
	UsePercent *int64 `json:"usePercent,omitempty"`
	// StaleUDP counts the UDP entries of Services answered by no serving
	// endpoint (staleUDP and staleUDPPending).
	StaleUDP int `json:"staleUDP"`
	// Settings counts the kernel settings that break Services.
	Settings int `json:"settings"`
}

// summarize fills what staleProblems has not counted: the table's use and
// the settings.
func (rep *ConntrackReport) summarize(in ConntrackInputs) {
	s := &rep.Summary
	if count, max, ok := tableSize(in); ok {
		s.Count, s.Max = &count, &max
		if max > 0 {
			use := count * 100 / max
			s.UsePercent = &use
		}
	}
	for _, p := range rep.Problems {
		if conntrackArea(p.Kind) == "kernel" {
			s.Settings++
		}
	}
}
