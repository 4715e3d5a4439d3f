package main

import (
	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/starter"
	"github.com/jobbill/jobbill/worker"
)

// withStarter runs a command with a starter over fresh ledger and Temporal connections, closed
// when the command is done.
func withStarter(run func(cmd *cobra.Command, st *starter.Starter, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cfg, err := loadConfig()
		if err != nil {
			return err
		}
		logger, err := worker.NewLogger(worker.LogConfig{Level: "warn", Format: "console"})
		if err != nil {
			return err
		}
		ledger, err := ledgerdb.Open(cmd.Context(), cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer ledger.Close()
		tc, err := worker.Dial(cmd.Context(), cfg, logger)
		if err != nil {
			return err
		}
		defer tc.Close()
		return run(cmd, worker.NewStarter(cfg, tc, ledger), args)
	}
}
