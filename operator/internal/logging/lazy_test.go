package logging

import (
	"bytes"
	goruntime "runtime"
	"strings"
	"sync"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

func newLoggers(level zapcore.Level) (plain, lazy *zap.Logger, plainOut, lazyOut *bytes.Buffer) {
	plainOut, lazyOut = &bytes.Buffer{}, &bytes.Buffer{}
	enc := func() zapcore.Encoder {
		cfg := zap.NewProductionEncoderConfig()
		cfg.TimeKey = "" // no time: the two outputs compare
		return zapcore.NewJSONEncoder(cfg)
	}
	plain = zap.New(zapcore.NewCore(enc(), zapcore.AddSync(plainOut), level))
	lazy = zap.New(zapcore.NewCore(enc(), zapcore.AddSync(lazyOut), level), zap.WrapCore(Lazy))
	return plain, lazy, plainOut, lazyOut
}

// What a lazy logger writes is what the plain one writes, fields given at every level of
// the chain, in order, and two loggers made from one never see each other's fields.
func TestLazyWritesWhatThePlainCoreWrites(t *testing.T) {
	plain, lazy, plainOut, lazyOut := newLoggers(zapcore.InfoLevel)
	for _, l := range []*zap.Logger{plain, lazy} {
		ctrl := l.With(zap.String("controller", "trainjob"))
		a := ctrl.With(zap.String("trainJob", "ns/a"), zap.Int("attempt", 1))
		b := ctrl.With(zap.String("trainJob", "ns/b"))
		a.Info("reconciled", zap.Duration("took", 3))
		b.Info("reconciled")
		a.With(zap.String("step", "render")).Error("failed", zap.String("why", "x"))
		ctrl.Debug("not written")
		ctrl.With().Info("no fields added")
		l.Info("root")
	}
	if plainOut.String() != lazyOut.String() {
		t.Fatalf("lazy wrote\n%s\nplain wrote\n%s", lazyOut, plainOut)
	}
	if !strings.Contains(lazyOut.String(), `"controller":"trainjob","trainJob":"ns/b"}`) || strings.Count(lazyOut.String(), "\n") != 5 {
		t.Fatalf("unexpected output:\n%s", lazyOut)
	}
}

// A logger given fields that writes nothing (most reconciles', at the default level) costs
// its fields, not an encoding buffer (zap's own With takes 1 KiB of a buffer per call).
func TestLazyWithAllocatesLittleUntilWritten(t *testing.T) {
	plain, lazy, _, _ := newLoggers(zapcore.InfoLevel)
	perWith := func(l *zap.Logger) uint64 {
		var ms0, ms1 goruntime.MemStats
		goruntime.ReadMemStats(&ms0)
		for range 100 {
			l.With(zap.String("TrainJob", "ns/a"), zap.String("reconcileID", "6f0f2c55-0c59-4a8c-9b0f-1b1e4a0a7c1d")).Debug("not written")
		}
		goruntime.ReadMemStats(&ms1)
		return (ms1.TotalAlloc - ms0.TotalAlloc) / 100
	}
	p, l := perWith(plain), perWith(lazy)
	t.Logf("per With: lazy %d bytes, zap's own %d", l, p)
	if l > p/2 {
		t.Errorf("a With that writes nothing allocated %d bytes (zap's own: %d)", l, p)
	}
}

// Loggers are shared across goroutines: the fields are encoded once, whoever writes first.
func TestLazyWritesFromManyGoroutines(t *testing.T) {
	out := &syncBuffer{}
	cfg := zap.NewProductionEncoderConfig()
	cfg.TimeKey = ""
	l := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(cfg), out, zapcore.InfoLevel), zap.WrapCore(Lazy)).With(zap.String("trainJob", "ns/a"))
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 50 {
				l.Info("reconciled")
			}
		})
	}
	wg.Wait()
	want := `{"level":"info","msg":"reconciled","trainJob":"ns/a"}`
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 400 {
		t.Fatalf("%d lines, want 400", len(lines))
	}
	for _, line := range lines {
		if line != want {
			t.Fatalf("line %q, want %q", line, want)
		}
	}
}

type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) Sync() error { return nil }

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
