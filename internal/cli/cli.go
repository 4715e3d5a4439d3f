// Package cli is what jobbill's two commands share: the root command with its configuration flags,
// loading the configuration, and running a subcommand over fresh connections. cmd/jobbill is the
// product an operator runs; cmd/jobbill-dev is the tooling (the dev run, the benchmarks, the chaos
// run).
package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// settings holds the configuration: defaults, JOBBILL_* variables, the --config file and flags.
var settings = config.NewViper()

// Execute runs root until it returns or the process gets SIGINT or SIGTERM, and exits 1, printing
// the error, when it fails.
func Execute(root *cobra.Command) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := root.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", root.Name(), err)
		stop()
		os.Exit(1)
	}
}

// NewRoot is a root command reading the configuration: flags win over JOBBILL_* environment
// variables, which win over a YAML file given with --config (keys as in config.Config), which win
// over the defaults.
func NewRoot(use, short string) *cobra.Command {
	var configFile string
	root := &cobra.Command{
		Use:           use,
		Short:         short,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if configFile == "" {
				return nil
			}
			settings.SetConfigFile(configFile)
			if err := settings.ReadInConfig(); err != nil {
				return fmt.Errorf("reading %s: %w", configFile, err)
			}
			return nil
		},
	}
	def := config.Default()
	flags := root.PersistentFlags()
	flags.StringVar(&configFile, "config", "", "YAML configuration file (keys as in config.Config)")
	flags.String("database-url", def.DatabaseURL, "Postgres URL of the ledger, as the application role (env JOBBILL_DATABASE_URL)")
	flags.String("migrate-database-url", def.MigrateDatabaseURL, "Postgres URL of the ledger as the schema's owner, for migrate (env JOBBILL_MIGRATE_DATABASE_URL)")
	flags.String("temporal-address", def.Temporal.Address, "Temporal frontend host:port (env JOBBILL_TEMPORAL_ADDRESS)")
	// A flag wins only when it is given; otherwise the environment, the file and the defaults do.
	_ = settings.BindPFlag("database_url", flags.Lookup("database-url"))
	_ = settings.BindPFlag("migrate_database_url", flags.Lookup("migrate-database-url"))
	_ = settings.BindPFlag("temporal.address", flags.Lookup("temporal-address"))
	return root
}

// LoadConfig reads the whole configuration, checked.
func LoadConfig() (config.Config, error) { return config.Load(settings) }

// MigrateDatabaseURL is the ledger as the schema's owner, the only role that may change it.
func MigrateDatabaseURL() string { return settings.GetString("migrate_database_url") }

// quietLogger is the logger of a command that prints its own output: the SDK logs only warnings.
func quietLogger() (*zap.Logger, error) {
	return connect.NewLogger(config.Log{Level: "warn", Format: "console", Output: "stderr"})
}

// WithLogger runs a long-running service (the worker, the API) with the configuration and a
// logger as log.* says, synced when the service returns.
func WithLogger(run func(ctx context.Context, cfg config.Config, logger *zap.Logger, cmd *cobra.Command) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, _ []string) error {
		cfg, err := LoadConfig()
		if err != nil {
			return err
		}
		logger, err := connect.NewLogger(cfg.Log)
		if err != nil {
			return err
		}
		defer func() { _ = logger.Sync() }()
		return run(cmd.Context(), cfg, logger, cmd)
	}
}

// WithConns runs a command over a fresh ledger connection and a Temporal client that connects on
// first use (connect.OpenForCommand), both closed when the command is done: a command whose ledger
// part can be done while Temporal is unreachable does it.
func WithConns(run func(cmd *cobra.Command, c *connect.Conns, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cfg, err := LoadConfig()
		if err != nil {
			return err
		}
		logger, err := quietLogger()
		if err != nil {
			return err
		}
		conns, err := connect.OpenForCommand(cmd.Context(), cfg, logger)
		if err != nil {
			return err
		}
		defer conns.Close()
		return run(cmd, conns, args)
	}
}

// WithJobs runs a command with a job service over fresh ledger and Temporal connections.
func WithJobs(run func(cmd *cobra.Command, st *jobs.Service, args []string) error) func(*cobra.Command, []string) error {
	return WithConns(func(cmd *cobra.Command, c *connect.Conns, args []string) error {
		return run(cmd, c.Jobs(), args)
	})
}

// WithLedger runs a command over a fresh ledger connection only (the ledger alone, no Temporal).
func WithLedger(run func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		cfg, err := LoadConfig()
		if err != nil {
			return err
		}
		store, err := ledgerdb.Open(cmd.Context(), cfg.DatabaseURL)
		if err != nil {
			return err
		}
		defer store.Close()
		return run(cmd, store, args)
	}
}

// PrintJSON prints v as indented JSON on the command's output.
func PrintJSON(cmd *cobra.Command, v any) error {
	enc := json.NewEncoder(cmd.OutOrStdout())
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}
