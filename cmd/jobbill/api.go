package main

import (
	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/app"
	"github.com/jobbill/jobbill/internal/cli"
)

// newAPICommand is `jobbill api`: the HTTP API over the job service and the ledger.
func newAPICommand() *cobra.Command {
	return &cobra.Command{
		Use:   "api",
		Short: "Serve the HTTP API (submit, poll, delete, report results; accounts and grants) until SIGINT/SIGTERM",
		Long: `Serves the HTTP API on api.listen (docs/api.md; api/openapi.yaml). Callers send
"Authorization: Bearer <key>" with one of api.keys, e.g.
  JOBBILL_API_KEYS="key-for-acme-0000001=acme;key-for-admin-000001=admin" jobbill api
Jobs make progress only while a worker runs (jobbill worker, or make run). On SIGINT or SIGTERM it
stops taking requests and gives in-flight ones api.shutdown_timeout to finish.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := cli.LoadConfig()
			if err != nil {
				return err
			}
			logger, err := app.NewLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			return app.RunAPI(cmd.Context(), cfg, logger, cmd.ErrOrStderr())
		},
	}
}
