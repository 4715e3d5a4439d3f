package connect

import (
	"fmt"
	"log/slog"
	"math"

	"go.temporal.io/sdk/log"
	"go.uber.org/zap"
	"go.uber.org/zap/exp/zapslog"
	"go.uber.org/zap/zapcore"

	"github.com/jobbill/jobbill/config"
)

// NewLogger builds the process's zap logger from the configuration.
func NewLogger(c config.Log) (*zap.Logger, error) {
	level, err := zapcore.ParseLevel(c.Level)
	if err != nil {
		return nil, fmt.Errorf("log.level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	if c.Format == "console" {
		cfg = zap.NewDevelopmentConfig()
		cfg.DisableStacktrace = true
	}
	cfg.Level = zap.NewAtomicLevelAt(level)
	if c.Output != "" {
		cfg.OutputPaths = []string{c.Output}
	}
	return cfg.Build()
}

// SDKLogger adapts zap to the Temporal SDK's logger through slog, so that the SDK's key/value
// pairs become zap fields.
func SDKLogger(z *zap.Logger) log.Logger {
	// A GPU attempt that fails is an expected event that the SDK logs at error level; a stack
	// trace of the SDK's own frames under each one would only bury the message.
	noStacktraces := zapslog.AddStacktraceAt(slog.Level(math.MaxInt32))
	return log.NewStructuredLogger(slog.New(zapslog.NewHandler(z.Core(), zapslog.WithCaller(true), noStacktraces)))
}
