package nft

// readOptions choose the path a reader takes through its input. The zero
// value is what ParseJSON and ParseText use: every fast path on. Tests
// set them to hold a fast path equal to the slow one; they are passed
// down, never kept in package variables, so that such tests run in
// parallel.
type readOptions struct {
	// jsonOneAtATime reads the "nftables" array one object at a time,
	// with no segments parsed on workers (jsonpipe.go).
	jsonOneAtATime bool
	// jsonSegmentMin is the least input a JSON segment holds (0:
	// jsonSegmentSize); 1 cuts before about every rule and chain.
	jsonSegmentMin int
	// textWhole parses a text in one piece, never in segments
	// (textpar.go).
	textWhole bool
}

// segmentMin is the least input a JSON segment holds.
func (o readOptions) segmentMin() int {
	if o.jsonSegmentMin > 0 {
		return o.jsonSegmentMin
	}
	return jsonSegmentSize
}
