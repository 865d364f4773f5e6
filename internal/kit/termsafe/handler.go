package termsafe

import (
	"context"
	"fmt"
	"log/slog"
)

// Handler wraps a slog.Handler that writes for a terminal (such as tint's)
// so that the message and every string attribute reach it escaped by
// String. A JSON handler needs no wrapper: its encoding is already safe
// and lossless.
func Handler(h slog.Handler) slog.Handler { return handler{next: h} }

type handler struct{ next slog.Handler }

func (h handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h handler) Handle(ctx context.Context, r slog.Record) error {
	clean := slog.NewRecord(r.Time, r.Level, String(r.Message), r.PC)
	r.Attrs(func(a slog.Attr) bool {
		clean.AddAttrs(attr(a))
		return true
	})
	return h.next.Handle(ctx, clean)
}

func (h handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = attr(a)
	}
	return handler{next: h.next.WithAttrs(clean)}
}

func (h handler) WithGroup(name string) slog.Handler {
	return handler{next: h.next.WithGroup(String(name))}
}

// attr escapes an attribute's key and value, groups included. Values of
// other kinds than string, group and any print no control characters.
func attr(a slog.Attr) slog.Attr {
	a.Key = String(a.Key)
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		a.Value = slog.StringValue(String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]slog.Attr, len(group))
		for i, g := range group {
			clean[i] = attr(g)
		}
		a.Value = slog.GroupValue(clean...)
	case slog.KindAny:
		if s := fmt.Sprint(v.Any()); !Safe(s) {
			a.Value = slog.StringValue(String(s))
		} else {
			a.Value = v
		}
	default:
		a.Value = v
	}
	return a
}
