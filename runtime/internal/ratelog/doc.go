// Package ratelog bounds the log records that untrusted input can cause:
// a flood of bad packets or failed handshakes must not become a flood of
// log lines. A [Limiter] passes the first [Burst] events of each
// [Interval] and counts the rest; when an interval in which it suppressed
// events ends, or when it is closed, it logs one summary record, "<what>:
// N more suppressed", with the count in a suppressed attribute. A
// [Handler] puts a limiter per message in front of a slog.Handler, for
// the records at Warn and above.
package ratelog
