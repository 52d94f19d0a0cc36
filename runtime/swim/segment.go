package swim

// Segment returns the segment the node gossips in ([WithSegment]): the
// segment of every member it sees. runtime.Node.Members reports it.
func (d *Discovery) Segment() string { return d.cfg.segment }
