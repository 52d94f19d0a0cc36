// Package testwait bounds the waits of tests. It is for tests only: the
// guard turns a hang into a failure, and no test relies on it for
// synchronisation.
package testwait
