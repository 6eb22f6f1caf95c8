package correlate

// GroupConntrack groups entries as FindConntrack groups its own: per
// Service port (or deleted address) and protocol, the stale ones by cause.
// explain groups one Service's entries per IP family with it, as its ports
// are per family.
func GroupConntrack(entries []ConntrackEntry) []ConntrackGroup { return groupConntrack(entries) }
