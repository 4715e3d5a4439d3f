// Command jobbill-dev is jobbill's tooling, kept apart from the product binary: the dev run that
// plays the stories against a worker (make run), the ledger and workflow benchmarks, and the
// chaos run. It reads the same configuration as jobbill.
package main

import "github.com/jobbill/jobbill/internal/cli"

func main() {
	root := cli.NewRoot("jobbill-dev", "jobbill's tooling: the dev run, the benchmarks and the chaos run")
	root.AddCommand(
		newRunCommand(),
		newBenchLedgerCommand(),
		newBenchWorkflowCommand(),
		newChaosCommand(),
	)
	cli.Execute(root)
}
