package main

import (
	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/app"
	"github.com/jobbill/jobbill/internal/cli"
)

func newWorkerCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "worker",
		Short: "Run the worker: metered job workflows and their activities, until SIGINT or SIGTERM",
		Args:  cobra.NoArgs,
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
			return app.RunWorker(cmd.Context(), cfg, logger)
		},
	}
}
