package activitiestest

import (
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/log"
)

// Logger is an SDK logger that writes to t.Log, so the SDK's logs show only for a failing test or
// with -v. It drops what comes after the test ends: a goroutine the SDK's test environment leaves
// behind must not log into a finished test.
func Logger(t *testing.T) log.Logger {
	w := &testWriter{t: t}
	t.Cleanup(func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		w.done = true
	})
	return log.NewStructuredLogger(slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})))
}

type testWriter struct {
	t    *testing.T
	mu   sync.Mutex
	done bool
}

func (w *testWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSuffix(string(p), "\n"))
	}
	return len(p), nil
}
