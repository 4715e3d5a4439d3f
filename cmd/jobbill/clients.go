package main

import (
	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/starter"
	"github.com/jobbill/jobbill/worker"
)

// connections are what most commands work with: the configuration, the ledger and Temporal.
type connections struct {
	cfg      worker.Config
	ledger   *ledgerdb.Store
	temporal client.Client
}

// withConnections runs a command over fresh ledger and Temporal connections, closed when the
// command is done. The SDK logs only warnings, so a command's own output stays readable.
func withConnections(run func(cmd *cobra.Command, c *connections, args []string) error) func(*cobra.Command, []string) error {
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
		return run(cmd, &connections{cfg: cfg, ledger: ledger, temporal: tc}, args)
	}
}

// withStarter runs a command with a starter over fresh ledger and Temporal connections.
func withStarter(run func(cmd *cobra.Command, st *starter.Starter, args []string) error) func(*cobra.Command, []string) error {
	return withConnections(func(cmd *cobra.Command, c *connections, args []string) error {
		return run(cmd, worker.NewStarter(c.cfg, c.temporal, c.ledger), args)
	})
}
