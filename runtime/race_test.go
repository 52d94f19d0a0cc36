//go:build race

package runtime

// raceEnabled: the race detector changes what the heap holds, which
// TestCatalogMemory counts.
const raceEnabled = true
