//go:build race

package swim_test

// raceEnabled: the race detector slows gossip's handling several times,
// too much for 50 nodes with Fast timings in one process.
const raceEnabled = true
