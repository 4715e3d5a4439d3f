package main

import (
	"errors"
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
)

// newPriceCommand is `jobbill price`: the price list that prices every job. Jobs name a kind and
// never an amount, so this is where what a job costs is decided.
func newPriceCommand() *cobra.Command {
	price := &cobra.Command{
		Use:   "price",
		Short: "Set and read the price list: what a job of each kind holds and costs",
		Long: `Every job names a kind; the ledger's price list gives each kind a unit — job (a fixed price) or
gpu_second (metered by the second of GPU time) — a unit price in credits and the most units one job
may use. A job's charge holds unit price × units; a metered job is settled at the units its result
reports and the rest of the hold is released. Prices are versioned: a new price applies to jobs
submitted after it, and a job keeps the version it was submitted at.`,
	}
	price.AddCommand(newPriceSetCommand(), newPriceListCommand(), newPriceHistoryCommand())
	return price
}

func newPriceSetCommand() *cobra.Command {
	var (
		unit                string
		unitPrice, maxUnits int64
		memo                string
	)
	cmd := &cobra.Command{
		Use:   "set KIND --unit job|gpu_second --unit-price N [--max-units N] [--memo TEXT]",
		Short: "Set a kind's price as a new version, for jobs submitted after it (idempotent)",
		Long: `Writes a new version of KIND's price; jobs already submitted keep theirs. Setting the same unit,
unit price and maximum as the kind's current version writes nothing (already_applied). --max-units
is 1 for --unit job (its default) and required for --unit gpu_second: the most GPU-seconds one job
may use, which its charge holds. An invalid price is refused with nothing written.`,
		Example: `  jobbill price set render-4k --unit job --unit-price 40 --memo "launch price"
  jobbill price set transcribe --unit gpu_second --unit-price 1 --max-units 300`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked before connecting: a refused price never reaches the ledger.
			p, err := priceFromFlags(args[0], unit, unitPrice, maxUnits, cmd.Flags().Changed("max-units"), memo)
			if err != nil {
				return err
			}
			return cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, _ []string) error {
				set, outcome, err := store.SetPrice(cmd.Context(), p)
				if err != nil {
					return err
				}
				if outcome == ledgerdb.AlreadyApplied {
					fmt.Fprintf(cmd.OutOrStdout(), "kind %s: version %d already says %s; nothing was written (%s)\n",
						set.Kind, set.Version, describePrice(set), outcome)
					return nil
				}
				fmt.Fprintf(cmd.OutOrStdout(), "kind %s: version %d set: %s (%s)\n", set.Kind, set.Version, describePrice(set), outcome)
				return nil
			})(cmd, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&unit, "unit", "", "what the kind is sold by: job (a fixed price) or gpu_second (metered) (required)")
	f.Int64Var(&unitPrice, "unit-price", 0, "credits per unit, above zero (required)")
	f.Int64Var(&maxUnits, "max-units", 0, "the most units one job may use, which its charge holds (default 1 for --unit job; required for gpu_second)")
	f.StringVar(&memo, "memo", "", "why the price was set, kept with the version")
	_ = cmd.MarkFlagRequired("unit")
	_ = cmd.MarkFlagRequired("unit-price")
	return cmd
}

// priceFromFlags is the price `price set` asks for, checked as the ledger checks it, with its
// errors naming the flags.
func priceFromFlags(kind, unit string, unitPrice, maxUnits int64, maxGiven bool, memo string) (ledgerdb.Price, error) {
	p := ledgerdb.Price{Kind: kind, Unit: ledgerdb.Unit(unit), UnitPrice: unitPrice, MaxUnits: maxUnits, Memo: memo}
	switch {
	case p.Unit != ledgerdb.UnitJob && p.Unit != ledgerdb.UnitGPUSecond:
		return p, fmt.Errorf("--unit is %q; it must be job (a fixed price per job) or gpu_second (metered by the GPU-second); nothing was written", unit)
	case !maxGiven && p.Unit == ledgerdb.UnitJob:
		p.MaxUnits = 1
	case !maxGiven:
		return p, errors.New("--max-units is required for --unit gpu_second: the most GPU-seconds one job may use, which its charge holds; nothing was written")
	}
	if err := p.Validate(); err != nil {
		var invalid *ledgerdb.InvalidInputError
		if errors.As(err, &invalid) {
			flag := map[string]string{"kind": "KIND", "unit price": "--unit-price", "max units": "--max-units", "memo": "--memo"}[invalid.Field]
			return p, fmt.Errorf("%s %s; nothing was written", flag, invalid.Reason)
		}
		return p, err
	}
	return p, nil
}

// describePrice says a price in a sentence: "40 credits per job", or for a metered kind its unit
// price, its maximum and the hold that makes.
func describePrice(p ledgerdb.Price) string {
	if p.Unit == ledgerdb.UnitJob {
		return plural.Count(p.UnitPrice, "credit") + " per job"
	}
	return fmt.Sprintf("%s per GPU-second, at most %s per job (a job holds up to %s)", plural.Count(p.UnitPrice, "credit"),
		plural.Count(p.MaxUnits, "GPU-second"), plural.Count(p.Hold(), "credit"))
}

func newPriceListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "Print the price list: each kind's current price, what a job submitted now holds",
		Args:  cobra.NoArgs,
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, _ []string) error {
			prices, err := store.Prices(cmd.Context())
			if err != nil {
				return err
			}
			if asJSON {
				if prices == nil {
					prices = []ledgerdb.Price{}
				}
				return cli.PrintJSON(cmd, prices)
			}
			if len(prices) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no kind has a price yet; `jobbill price set KIND --unit job --unit-price N` sets one")
				return nil
			}
			printPrices(cmd, true, prices)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the list as JSON")
	return cmd
}

func newPriceHistoryCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "history KIND",
		Short: "Print every version of a kind's price, oldest first (a job's price_version names one)",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			versions, err := store.PriceHistory(cmd.Context(), args[0])
			if errors.Is(err, ledgerdb.ErrUnknownKind) || errors.Is(err, ledgerdb.ErrInvalidInput) {
				return fmt.Errorf("unknown kind %q: no price was ever set for it; `jobbill price list` shows the kinds", args[0])
			}
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd, versions)
			}
			printPrices(cmd, false, versions)
			return nil
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the versions as JSON")
	return cmd
}

// printPrices prints prices as a table, with their kind when they are of several kinds.
func printPrices(cmd *cobra.Command, withKind bool, prices []ledgerdb.Price) {
	w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
	header := "VERSION\tUNIT\tUNIT PRICE\tMAX UNITS\tHOLD\tSET AT\tMEMO"
	if withKind {
		header = "KIND\t" + header
	}
	fmt.Fprintln(w, header)
	for _, p := range prices {
		if withKind {
			fmt.Fprintf(w, "%s\t", p.Kind)
		}
		fmt.Fprintf(w, "%d\t%s\t%d\t%d\t%d\t%s\t%s\n", p.Version, p.Unit, p.UnitPrice, p.MaxUnits, p.Hold(),
			p.CreatedAt.UTC().Format("2006-01-02 15:04:05"), p.Memo)
	}
	_ = w.Flush()
}
