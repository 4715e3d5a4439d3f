package main

import (
	"context"
	"errors"
	"fmt"
	"net"

	"github.com/spf13/cobra"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/metrics"
	"github.com/jobbill/jobbill/worker"
)

// newAPICommand is `jobbill api`: the HTTP API over the starter and the ledger.
func newAPICommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "api",
		Short: "Serve the HTTP API (submit, poll, delete, report results; accounts and grants) until SIGINT/SIGTERM",
		Long: `Serves the HTTP API on api.listen (README, "HTTP API"; api/openapi.yaml). Callers send
"Authorization: Bearer <key>" with one of api.keys, e.g.
  JOBBILL_API_KEYS="key-for-acme-0000001=acme;key-for-admin-000001=admin" jobbill api
Jobs make progress only while a worker runs (jobbill worker, or make run). On SIGINT or SIGTERM it
stops taking requests and gives in-flight ones api.shutdown_timeout to finish.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig()
			if err != nil {
				return err
			}
			if len(cfg.API.Keys) == 0 {
				return errors.New("no API keys: set api.keys in the config file or JOBBILL_API_KEYS (\"key=account,account;key=admin\")")
			}
			logger, err := worker.NewLogger(cfg.Log)
			if err != nil {
				return err
			}
			defer func() { _ = logger.Sync() }()
			ctx := cmd.Context()
			ledger, err := ledgerdb.Open(ctx, cfg.DatabaseURL)
			if err != nil {
				return err
			}
			defer ledger.Close()
			m := metrics.New()
			defer func() { _ = m.Close() }()
			tc, err := worker.Dial(ctx, cfg, logger, m)
			if err != nil {
				return err
			}
			defer tc.Close()

			keys := make([]api.Key, 0, len(cfg.API.Keys))
			for _, k := range cfg.API.Keys {
				keys = append(keys, api.Key{Secret: k.Key, Accounts: k.Accounts, Admin: k.Admin})
			}
			srv := api.New(api.Options{
				Starter: worker.NewStarter(cfg, tc, ledger, m),
				Ledger:  ledger,
				Keys:    keys,
				Ready: []api.Check{
					{Name: "postgres", Probe: ledger.Pool().Ping},
					{Name: "temporal", Probe: func(ctx context.Context) error {
						_, err := tc.CheckHealth(ctx, &client.CheckHealthRequest{})
						return err
					}},
				},
				MaxBodyBytes:      cfg.API.MaxBodyBytes,
				RequestTimeout:    cfg.API.RequestTimeout,
				ReadHeaderTimeout: cfg.API.ReadHeaderTimeout,
				ReadTimeout:       cfg.API.ReadTimeout,
				WriteTimeout:      cfg.API.WriteTimeout,
				IdleTimeout:       cfg.API.IdleTimeout,
				ShutdownTimeout:   cfg.API.ShutdownTimeout,
				Logger:            logger,
				Metrics:           m.Handler(),
			})
			ln, err := net.Listen("tcp", cfg.API.Listen)
			if err != nil {
				return fmt.Errorf("api.listen %s: %w", cfg.API.Listen, err)
			}
			// The key count, never the keys.
			logger.Info("api listening", zap.String("address", ln.Addr().String()), zap.Int("keys", len(keys)),
				zap.String("task_queue", cfg.Temporal.TaskQueue))
			fmt.Fprintf(cmd.ErrOrStderr(), "jobbill api listening on http://%s (%d keys)\n", ln.Addr(), len(keys))
			if err := srv.Serve(ctx, ln); err != nil {
				return err
			}
			logger.Info("api stopped")
			return nil
		},
	}
	return cmd
}
