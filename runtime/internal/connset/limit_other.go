//go:build !unix

package connset

// fileLimit reports that the limit on open files is not known.
func fileLimit() (uint64, bool) { return 0, false }
