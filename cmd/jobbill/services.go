package main

import (
	"context"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/app"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/internal/cli"
)

// newWorkerCommand is `jobbill worker`: the metered job workflows and their activities, and the
// reconcile pass's schedule.
func newWorkerCommand() *cobra.Command {
	return newServiceCommand("worker",
		"Run the worker: metered job workflows and their activities, until SIGINT or SIGTERM", "",
		func(ctx context.Context, cfg config.Config, logger *zap.Logger, _ *cobra.Command) error {
			return app.RunWorker(ctx, cfg, logger)
		})
}

// newAPICommand is `jobbill api`: the HTTP API over the job service and the ledger.
func newAPICommand() *cobra.Command {
	return newServiceCommand("api",
		"Serve the HTTP API (submit, poll, delete, report results; accounts, grants and prices) until SIGINT/SIGTERM",
		`Serves the HTTP API on api.listen (docs/api.md; api/openapi.yaml). Callers send
"Authorization: Bearer <secret>" with an API key made by jobbill key create (or POST /v1/keys),
whose scope — customer, customer_read, runner or admin — says what it may call; keys are read from
the ledger on every request, so a revoked key fails at once. api.keys holds bootstrap admin keys
only, a way in for a fresh deployment, e.g.
  JOBBILL_API_KEYS="key-for-admin-000001=admin" jobbill api
Jobs make progress only while a worker runs (jobbill worker, or make run). On SIGINT or SIGTERM it
stops taking requests and gives in-flight ones api.shutdown_timeout to finish.`,
		func(ctx context.Context, cfg config.Config, logger *zap.Logger, cmd *cobra.Command) error {
			return app.RunAPI(ctx, cfg, logger, cmd.ErrOrStderr())
		})
}

// newServiceCommand is a command that runs a long-lived service until SIGINT or SIGTERM.
func newServiceCommand(use, short, long string, run func(context.Context, config.Config, *zap.Logger, *cobra.Command) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Long: long, Args: cobra.NoArgs, RunE: cli.WithLogger(run)}
}
