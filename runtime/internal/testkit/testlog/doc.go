// Package testlog collects log output for tests to inspect. It is for
// tests only.
package testlog
