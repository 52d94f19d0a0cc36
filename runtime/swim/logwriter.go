package swim

import (
	"bytes"
	"context"
	"log/slog"

	"github.com/wizardmesh/wizard/runtime/internal/ratelog"
)

// logWriter carries memberlist's log lines to slog. memberlist logs
// through a *log.Logger, one Write per line, with the level as a prefix:
// "[DEBUG] memberlist: ...". The prefix picks the slog level and is cut
// from the message; lines without one log at Info. The address a line
// names as "from=<addr>" (the sender of a packet or stream) goes in a
// remote attribute. Since anyone who reaches the gossip port can cause
// memberlist's warnings and errors at will (20,000 packets of noise gave
// 20,000 errors), those go through limit, a rate limiter, when it is set.
type logWriter struct {
	l     *slog.Logger
	limit *ratelog.Limiter
}

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
	if !w.l.Enabled(ctx, level) {
		return len(p), nil
	}
	if level >= slog.LevelWarn && w.limit != nil && !w.limit.Allow(level) {
		return len(p), nil
	}
	line, from := cutFrom(line)
	if from == nil {
		w.l.Log(ctx, level, string(line), "component", "memberlist")
	} else {
		w.l.Log(ctx, level, string(line), "component", "memberlist", "remote", string(from))
	}
	return len(p), nil
}

// cutFrom cuts memberlist's "from=<addr>" out of line, returning the line
// without it and the address (nil when the line names none).
func cutFrom(line []byte) (rest, from []byte) {
	i := bytes.Index(line, []byte(" from="))
	if i < 0 {
		return line, nil
	}
	addr := line[i+len(" from="):]
	end := bytes.IndexByte(addr, ' ')
	if bytes.HasPrefix(addr, []byte("<")) { // "<unknown address>"
		end = bytes.IndexByte(addr, '>') + 1
	}
	if end <= 0 {
		end = len(addr)
	}
	from = addr[:end]
	rest = append(bytes.Clone(line[:i]), addr[end:]...)
	return rest, from
}
