package main

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

func newJobCommand() *cobra.Command {
	job := &cobra.Command{
		Use:   "job",
		Short: "Submit jobs, read their status, report results, delete and re-drive them",
	}
	job.AddCommand(newJobSubmitCommand(), newJobStatusCommand(), newJobReportCommand(), newJobDeleteCommand(), newJobRedriveCommand())
	return job
}

func newJobSubmitCommand() *cobra.Command {
	var (
		inputRef string
		maxUnits int64
	)
	cmd := &cobra.Command{
		Use:   "submit JOB_ID ACCOUNT KIND [--max-units N] [--input REF]",
		Short: "Submit a job of a kind under a client-generated ID and wait until its charge is decided",
		Long: `Writes the job's placeholder, starts its workflow and waits until it is charged or rejected.
The job names its KIND, never an amount: prices are set by the server, and ` + "`jobbill price list`" + ` shows
the kinds. Its charge holds the kind's unit price × units — the kind's maximum, or for a kind
metered by the GPU-second the smaller --max-units — and a metered job is settled at the units its
result reports. Submitting the same ID and input again answers the original job, at the price it
was submitted at, and charges nothing more. With the simulated runner, --input may name a
scenario: sim:ok, sim:fail, sim:hang, sim:late:N, sim:ok-on-attempt:N, and a usage such as
sim:ok+used:137.`,
		Example: `  jobbill job submit render-1 acme render-4k
  jobbill job submit tr-1 acme transcribe --max-units 120 --input s3://audio/tr-1.wav`,
		Args: cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			kind := args[2]
			// Checked before connecting, so that a refused job never reaches the ledger.
			if ledgerdb.ValidateKind(kind) != nil {
				return unknownKindError(kind)
			}
			if cmd.Flags().Changed("max-units") && (maxUnits < 1 || maxUnits > ledgerdb.MaxUnits) {
				return fmt.Errorf("--max-units is %d; it must be from 1 to the kind's maximum (leave it out to hold the kind's maximum); nothing was written", maxUnits)
			}
			return cli.WithJobs(func(cmd *cobra.Command, st *jobs.Service, args []string) error {
				sub, err := st.Submit(cmd.Context(), jobs.Job{ID: args[0], AccountID: args[1], Kind: kind, MaxUnits: maxUnits, InputRef: inputRef})
				var invalid *ledgerdb.InvalidInputError
				switch {
				case errors.Is(err, ledgerdb.ErrUnknownKind):
					return unknownKindError(kind)
				case errors.As(err, &invalid) && invalid.Field == "max units":
					return fmt.Errorf("--max-units %s; nothing was written", invalid.Reason)
				case err != nil && !errors.Is(err, ledgerdb.ErrInsufficientCredits):
					return err
				}
				if perr := cli.PrintJSON(cmd, sub); perr != nil {
					return perr
				}
				return err
			})(cmd, args)
		},
	}
	cmd.Flags().StringVar(&inputRef, "input", "sim:ok", "the job's input reference")
	cmd.Flags().Int64Var(&maxUnits, "max-units", 0, "for a kind metered by the GPU-second, the most units this job may use, at most the kind's (default: the kind's)")
	return cmd
}

// jobArg is the job a command names: its JOB_ID argument in the account of --account. Job IDs
// belong to their account, so both are needed.
func jobArg(account string, args []string) (ledgerdb.JobKey, error) {
	key := ledgerdb.JobKey{AccountID: account, JobID: args[0]}
	if account == "" {
		return key, errors.New("--account is required: job IDs belong to their account; nothing was done")
	}
	return key, key.Validate()
}

// onJob adds --account to a command on one job (JOB_ID) and makes its RunE: the job is checked
// before anything connects, so a refused argument reaches neither the ledger nor Temporal, then
// run acts on it through the job service and its answer is printed.
func onJob(cmd *cobra.Command, run func(cmd *cobra.Command, st *jobs.Service, key ledgerdb.JobKey) (any, error)) *cobra.Command {
	var account string
	cmd.Flags().StringVar(&account, "account", "", "the account the job belongs to (required: job IDs belong to their account)")
	cmd.Args = cobra.ExactArgs(1)
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		key, err := jobArg(account, args)
		if err != nil {
			return err
		}
		return cli.WithJobs(func(cmd *cobra.Command, st *jobs.Service, _ []string) error {
			answer, err := run(cmd, st, key)
			if err != nil {
				return err
			}
			return cli.PrintJSON(cmd, answer)
		})(cmd, args)
	}
	return cmd
}

// unknownKindError is the refusal of a kind with no price — or of a number where the kind goes,
// which is how a cost was given before prices were set by the server.
func unknownKindError(kind string) error {
	return fmt.Errorf("unknown kind %q: prices are set by the server; `jobbill price list` shows the kinds", kind)
}

func newJobStatusCommand() *cobra.Command {
	return onJob(&cobra.Command{
		Use:     "status JOB_ID --account ACCOUNT",
		Short:   "Print a job's state, the state of the user's money and a sentence for the user",
		Example: `  jobbill job status render-1 --account acme`,
	}, func(cmd *cobra.Command, st *jobs.Service, key ledgerdb.JobKey) (any, error) {
		status, err := st.Status(cmd.Context(), key)
		if errors.Is(err, ledgerdb.ErrJobNotFound) {
			return nil, fmt.Errorf("job %q of %s: %s", key.JobID, key.AccountID, jobs.NotReceivedMessage)
		}
		return status, err
	})
}

func newJobReportCommand() *cobra.Command {
	var (
		attempt   int
		outputRef string
		unitsUsed int64
	)
	cmd := onJob(&cobra.Command{
		Use:   "report JOB_ID --account ACCOUNT --attempt N --output REF [--units-used N]",
		Short: "Report that a job's result landed (late results included), with its usage; never charges twice",
		Long: `Records the result in the ledger first, then hands it to the job's workflow (or, when that has
closed, to the late-result fallback). When Temporal cannot be reached the result stays recorded and
the reconcile pass applies it later ("path": "recorded"). A metered job is settled at --units-used:
charged units × unit price, capped at its hold, the rest of the hold released; without it, the
whole hold is charged. A kind sold by the job costs its price whatever its usage. An attempt below
1 or beyond the attempts the job has started, an empty output, or a negative usage is refused with
nothing written; so is a different result of an attempt that already reported one, whose first
result stands.`,
		Example: `  jobbill job report tr-1 --account acme --attempt 1 --output s3://results/tr-1 --units-used 137`,
		// Checked before connecting, so that a refused usage never reaches the ledger.
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("units-used") && unitsUsed < 0 {
				return fmt.Errorf("--units-used is %d; it must not be negative; nothing was written", unitsUsed)
			}
			return nil
		},
	}, func(cmd *cobra.Command, st *jobs.Service, key ledgerdb.JobKey) (any, error) {
		result := activities.WorkResult{Attempt: attempt, OutputRef: outputRef, FinishedAt: time.Now().UTC()}
		if cmd.Flags().Changed("units-used") {
			// The ledger bills a usage only for a kind metered by the GPU-second: a kind sold by
			// the job costs its price whatever a result says it used.
			result.UnitsUsed = &unitsUsed
		}
		report, err := st.ReportResult(cmd.Context(), key, result)
		if errors.Is(err, ledgerdb.ErrConflict) {
			return nil, fmt.Errorf("job %q of %s, attempt %d: %s", key.JobID, key.AccountID, attempt, jobs.ResultConflictMessage)
		}
		return report, err
	})
	cmd.Flags().IntVar(&attempt, "attempt", 1, "the attempt that produced the result (one the job's work has started)")
	cmd.Flags().StringVar(&outputRef, "output", "", "where the result is (required)")
	cmd.Flags().Int64Var(&unitsUsed, "units-used", 0, "the units of the job's kind the work used (GPU-seconds for a metered kind); the whole hold is charged without it")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func newJobDeleteCommand() *cobra.Command {
	return onJob(&cobra.Command{
		Use:   "delete JOB_ID --account ACCOUNT",
		Short: "Delete a settled job: its ID is burnt forever and its output hidden; no money moves, and a refunded job's late result still takes the refund back",
	}, func(cmd *cobra.Command, st *jobs.Service, key ledgerdb.JobKey) (any, error) {
		return st.Delete(cmd.Context(), key)
	})
}

func newJobRedriveCommand() *cobra.Command {
	var by, note string
	cmd := onJob(&cobra.Command{
		Use:   "redrive JOB_ID --account ACCOUNT",
		Short: "Run a dead-lettered (refunded) job's work again; on success the refund is reclaimed",
	}, func(cmd *cobra.Command, st *jobs.Service, key ledgerdb.JobKey) (any, error) {
		return st.Redrive(cmd.Context(), key, by, note)
	})
	cmd.Flags().StringVar(&by, "by", "cli", "who asks, for the timeline")
	cmd.Flags().StringVar(&note, "note", "", "why")
	return cmd
}
