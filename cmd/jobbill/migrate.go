package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/ledgerdb"
)

func newMigrateCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Apply the ledger's schema migrations (safe to repeat)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := ledgerdb.Migrate(cmd.Context(), databaseURL()); err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "ledger schema is up to date")
			return nil
		},
	}
}
