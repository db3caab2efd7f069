package runtimecli

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"strings"
)

// The daemon's log formats (serve --log-format).
const (
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// newLogger is the daemon's logger on w: slog's text handler (key=value)
// or its JSON handler, one object a line, at level info and above.
func newLogger(w io.Writer, format string) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: slog.LevelInfo}
	switch format {
	case LogFormatText, "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case LogFormatJSON:
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("--log-format %q: want %s or %s", format, LogFormatText, LogFormatJSON)
	}
}

// The prefixes of a Logf message that set its level (the packages below
// the edge log through a func(format, args...)): "debug: " for normal
// events an operator does not need (a sandbox's connection closing when it
// was removed), "warning: " for what needs attention, "error: " for
// failures. Any other message is at level info.
var logfLevels = []struct {
	prefix string
	level  slog.Level
}{
	{"debug: ", slog.LevelDebug},
	{"warning: ", slog.LevelWarn},
	{"error: ", slog.LevelError},
}

// logfTo is the Logf of the packages below the edge, writing to l at the
// level the message's prefix names (see logfLevels), without the prefix.
func logfTo(l *slog.Logger) func(format string, args ...any) {
	return func(format string, args ...any) {
		level := slog.LevelInfo
		for _, p := range logfLevels {
			if rest, ok := strings.CutPrefix(format, p.prefix); ok {
				format, level = rest, p.level
				break
			}
		}
		ctx := context.Background()
		if !l.Enabled(ctx, level) {
			return
		}
		l.Log(ctx, level, fmt.Sprintf(format, args...))
	}
}
