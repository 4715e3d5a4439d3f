// Command jobbill is jobbill's one binary: the worker, the ledger's migrations, the demo that
// plays the stories, and the job, account and dead-letter commands that product code and
// operators use.
//
// Configuration comes from flags, then JOBBILL_* environment variables, then a YAML file given
// with --config, then defaults (worker.Config lists every key).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/worker"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "jobbill:", err)
		os.Exit(1)
	}
}

// settings holds the configuration: defaults, JOBBILL_* variables, the --config file and flags.
var settings = worker.NewViper()

func newRootCommand() *cobra.Command {
	var configFile string
	root := &cobra.Command{
		Use:           "jobbill",
		Short:         "Bill GPU jobs in credits, correctly, when they fail messily",
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
	flags := root.PersistentFlags()
	flags.StringVar(&configFile, "config", "", "YAML configuration file (keys as in worker.Config)")
	flags.String("database-url", worker.DefaultConfig().DatabaseURL, "Postgres URL of the ledger, as the application role (env JOBBILL_DATABASE_URL)")
	flags.String("migrate-database-url", worker.DefaultConfig().MigrateDatabaseURL, "Postgres URL of the ledger as the schema's owner, for migrate and dev (env JOBBILL_MIGRATE_DATABASE_URL)")
	flags.String("temporal-address", worker.DefaultConfig().Temporal.Address, "Temporal frontend host:port (env JOBBILL_TEMPORAL_ADDRESS)")
	// A flag wins only when it is given; otherwise the environment, the file and the defaults do.
	_ = settings.BindPFlag("database_url", flags.Lookup("database-url"))
	_ = settings.BindPFlag("migrate_database_url", flags.Lookup("migrate-database-url"))
	_ = settings.BindPFlag("temporal.address", flags.Lookup("temporal-address"))

	root.AddCommand(
		newWorkerCommand(),
		newDevCommand(),
		newMigrateCommand(),
		newDemoCommand(),
		newJobCommand(),
		newAccountCommand(),
		newDeadLetterCommand(),
		newBenchLedgerCommand(),
		newAPICommand(),
		newBenchWorkflowCommand(),
		newAuditCommand(),
		newChaosCommand(),
	)
	return root
}

func databaseURL() string { return settings.GetString("database_url") }

// migrateDatabaseURL is the ledger as the schema's owner, the only role that may change it.
func migrateDatabaseURL() string { return settings.GetString("migrate_database_url") }

// loadConfig reads the whole configuration, checked.
func loadConfig() (worker.Config, error) { return worker.Load(settings) }
