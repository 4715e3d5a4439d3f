package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/ledgerdb"
)

func newMigrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the ledger's schema migrations and install its functions (safe to repeat)",
		Long: `Applies the ledger's schema migrations as the schema's owner, on --migrate-database-url /
JOBBILL_MIGRATE_DATABASE_URL, then installs the ledger's functions (ledgerdb/code) when they
changed. The services connect as the application role instead (--database-url), which may not
change the schema; the schema grants it what it needs and fails, saying so, when the role
jobbill_app does not exist yet (scripts/ensure-postgres.sh creates it).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := ledgerdb.Migrate(cmd.Context(), cli.MigrateDatabaseURL()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ledger schema is up to date")
			return nil
		},
	}
}
