// Package leak checks that a test leaves no goroutines behind. It is for
// tests only, and counts goroutines with runtime.NumGoroutine, so it must
// not be used inside a testing/synctest bubble.
package leak
