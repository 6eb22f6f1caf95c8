package correlate

// OnlyService is o with only one Service and its EndpointSlices, and the
// objects of other kinds: what ReadServiceObjects reads of the same input.
func (o *Objects) OnlyService(only ServiceFilter) *Objects {
	out := &Objects{Other: o.Other}
	for _, s := range o.Services {
		if only.keepService(s.Namespace, s.Name) {
			out.Services = append(out.Services, s)
		}
	}
	for _, s := range o.EndpointSlices {
		if only.keepSlice(s) {
			out.EndpointSlices = append(out.EndpointSlices, s)
		}
	}
	return out
}
