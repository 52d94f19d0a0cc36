// Package benchkit holds what the remote-call comparison (package harness)
// and the gateway benchmark (package gwbench) both need: the server
// processes they start and query, what /proc says of a process, the
// statistics of a run and the log-scale axis of their charts.
package benchkit
