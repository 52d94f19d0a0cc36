package mux

// Take counts a request of the share's caller in flight, unless the
// caller already holds its part of the budget and the budget has no room
// beyond its reserve; it reports whether it did.
// It is for a transport that does not serve through mux (a broker's):
// each Take that returned true is followed by one [Share.Release].
func (s *Share) Take() bool { return s.take() }

// Release counts a request taken with [Share.Take] as answered.
func (s *Share) Release() { s.release() }

// Busy reports whether the share's caller has requests in flight.
func (s *Share) Busy() bool { return s.inflight.Load() > 0 }
