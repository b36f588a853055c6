package pipeline

import (
	"context"
	"log/slog"
)

// infoAsDebug is a handler that passes records on one level lower when
// they are INFO: the engines' per-call lines ("fetch planned", "export
// starting"), which for a head stream polling every few seconds would be
// two lines per block, become debug output, and the monitor's progress line
// once per interval says what the stream is doing. Warnings and errors pass
// as they are.
type infoAsDebug struct{ h slog.Handler }

// demoteInfo returns log with its INFO records logged at DEBUG.
func demoteInfo(log *slog.Logger) *slog.Logger { return slog.New(infoAsDebug{log.Handler()}) }

func (d infoAsDebug) Enabled(ctx context.Context, l slog.Level) bool {
	if l == slog.LevelInfo {
		l = slog.LevelDebug
	}
	return d.h.Enabled(ctx, l)
}

func (d infoAsDebug) Handle(ctx context.Context, r slog.Record) error {
	if r.Level == slog.LevelInfo {
		r = r.Clone()
		r.Level = slog.LevelDebug
	}
	return d.h.Handle(ctx, r)
}

func (d infoAsDebug) WithAttrs(as []slog.Attr) slog.Handler { return infoAsDebug{d.h.WithAttrs(as)} }
func (d infoAsDebug) WithGroup(name string) slog.Handler    { return infoAsDebug{d.h.WithGroup(name)} }
