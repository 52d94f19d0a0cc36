package swim

import (
	"bytes"
	"context"
	"log/slog"
)

// logWriter carries memberlist's log lines to slog. memberlist logs
// through a *log.Logger, one Write per line, with the level as a prefix:
// "[DEBUG] memberlist: ...". The prefix picks the slog level and is cut
// from the message; lines without one log at Info.
type logWriter struct{ l *slog.Logger }

var logLevels = [...]struct {
	prefix string
	level  slog.Level
}{
	{"[DEBUG]", slog.LevelDebug},
	{"[INFO]", slog.LevelInfo},
	{"[WARN]", slog.LevelWarn},
	{"[ERR]", slog.LevelError},
	{"[ERROR]", slog.LevelError},
}

func (w logWriter) Write(p []byte) (int, error) {
	line := bytes.TrimSpace(p)
	level := slog.LevelInfo
	for _, l := range logLevels {
		if bytes.HasPrefix(line, []byte(l.prefix)) {
			level = l.level
			line = bytes.TrimSpace(line[len(l.prefix):])
			break
		}
	}
	if bytes.HasPrefix(line, []byte("Err:")) { // one memberlist line has no bracketed prefix
		level = slog.LevelError
	}
	ctx := context.Background()
	if w.l.Enabled(ctx, level) {
		w.l.Log(ctx, level, string(line), "component", "memberlist")
	}
	return len(p), nil
}
