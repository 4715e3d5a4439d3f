// Command jobbill is what an operator runs: the worker, the HTTP API, the ledger's migrations,
// and the job, account, price, API key, dead-letter, audit and revenue commands that product code and
// operators use. The tooling — the dev run, the benchmarks, the chaos run — is cmd/jobbill-dev.
//
// Configuration comes from flags, then JOBBILL_* environment variables, then a YAML file given
// with --config, then defaults (config.Config lists every key; docs/configuration.md is the table).
package main

import (
	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
)

func main() { cli.Execute(newRoot()) }

// newRoot is the whole command tree, built afresh on each call so that the tests can run it with
// arguments of their own.
func newRoot() *cobra.Command {
	root := cli.NewRoot("jobbill", "Bill GPU jobs in credits, correctly, when they fail messily")
	root.AddCommand(
		newWorkerCommand(),
		newAPICommand(),
		newMigrateCommand(),
		newJobCommand(),
		newAccountCommand(),
		newPriceCommand(),
		newKeyCommand(),
		newWebhookCommand(),
		newDeadLetterCommand(),
		newAuditCommand(),
		newRevenueCommand(),
	)
	return root
}
