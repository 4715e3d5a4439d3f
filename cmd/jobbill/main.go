// Command jobbill is jobbill's one binary: it migrates the ledger, plays the ledger demo, and
// reads and tops up accounts.
//
// Configuration comes from flags, then JOBBILL_* environment variables, then defaults; the
// database is JOBBILL_DATABASE_URL (or --database-url).
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/viper"
)

// defaultDatabaseURL is the service database that scripts/ensure-postgres.sh creates.
const defaultDatabaseURL = "postgres://jobbill:jobbill@127.0.0.1:5432/jobbill?sslmode=disable"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCommand().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "jobbill:", err)
		os.Exit(1)
	}
}

// config binds flags and JOBBILL_* environment variables; flags win.
var config = viper.New()

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "jobbill",
		Short:         "Bill GPU jobs in credits, correctly, when they fail messily",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().String("database-url", defaultDatabaseURL, "Postgres URL of the ledger (env JOBBILL_DATABASE_URL)")
	_ = config.BindPFlag("database_url", root.PersistentFlags().Lookup("database-url"))
	config.SetEnvPrefix("JOBBILL")
	config.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	config.AutomaticEnv()

	root.AddCommand(newMigrateCommand(), newDemoCommand(), newAccountCommand())
	return root
}

func databaseURL() string { return config.GetString("database_url") }
