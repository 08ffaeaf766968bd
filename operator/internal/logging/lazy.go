// Package logging holds the operator's logger plumbing.
package logging

import (
	"slices"
	"sync"

	"go.uber.org/zap/zapcore"
)

// Lazy wraps core so that the fields a logger is given (logr's WithValues, zap's With) are
// encoded when the logger first writes, not when they are given. Every reconcile gets a
// logger with its object and reconcile ID (controller-runtime's) and the job's name
// (Kiln's); zap encodes such fields at once into a buffer of its own, 1 KiB each, though
// most reconciles log nothing at the levels enabled (docs/performance.md, "A logger's
// fields are encoded when it writes"). What is written is the same, field for field; a
// field whose value changes after it was given is written as it is then (the operator
// gives values, names and IDs, that do not change).
//
// Not zap's own zapcore.NewLazyWith: its With encodes the fields given before at once, and
// a reconcile's logger is made by three With calls in a row (controller-runtime's two and
// Kiln's), so only the last would wait.
func Lazy(core zapcore.Core) zapcore.Core {
	return &lazyCore{base: core}
}

type lazyCore struct {
	// base is the wrapped core, without fields; fields are those given since, in order.
	base   zapcore.Core
	fields []zapcore.Field

	once    sync.Once
	encoded zapcore.Core
}

// core is base with fields encoded, once.
func (l *lazyCore) core() zapcore.Core {
	l.once.Do(func() {
		l.encoded = l.base
		if len(l.fields) > 0 {
			l.encoded = l.base.With(l.fields)
		}
	})
	return l.encoded
}

func (l *lazyCore) Enabled(level zapcore.Level) bool { return l.base.Enabled(level) }

func (l *lazyCore) With(fields []zapcore.Field) zapcore.Core {
	if len(fields) == 0 {
		return l
	}
	// Clipped, so that two loggers made from this one never share the appended fields.
	return &lazyCore{base: l.base, fields: append(slices.Clip(l.fields), fields...)}
}

func (l *lazyCore) Check(entry zapcore.Entry, checked *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if !l.base.Enabled(entry.Level) {
		return checked
	}
	return l.core().Check(entry, checked)
}

func (l *lazyCore) Write(entry zapcore.Entry, fields []zapcore.Field) error {
	return l.core().Write(entry, fields)
}

func (l *lazyCore) Sync() error { return l.base.Sync() }
