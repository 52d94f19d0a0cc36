package config

// conflicts refuses routes that share a method and can match the same
// path with neither more specific than the other.
func (v *validator) conflicts() {}
