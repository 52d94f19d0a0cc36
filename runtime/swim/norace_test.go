//go:build !race

package swim_test

const raceEnabled = false
