package main

import (
	"errors"
	"fmt"
	"strconv"
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
	var inputRef string
	cmd := &cobra.Command{
		Use:   "submit JOB_ID ACCOUNT CREDITS [--input REF]",
		Short: "Submit a job under a client-generated ID and wait until its charge is decided",
		Long: `Writes the job's placeholder, starts its workflow and waits until it is charged or rejected.
Submitting the same ID and input again answers the original job and charges nothing more. With the
simulated runner, --input may name a scenario: sim:ok, sim:fail, sim:hang, sim:late:N, sim:ok-on-attempt:N.`,
		Args: cobra.ExactArgs(3),
		RunE: cli.WithJobs(func(cmd *cobra.Command, st *jobs.Service, args []string) error {
			cost, err := strconv.ParseInt(args[2], 10, 64)
			if err != nil {
				return fmt.Errorf("credits %q: a whole number of credits is needed", args[2])
			}
			sub, err := st.Submit(cmd.Context(), jobs.Job{ID: args[0], AccountID: args[1], Cost: cost, InputRef: inputRef})
			if err != nil && !errors.Is(err, ledgerdb.ErrInsufficientCredits) {
				return err
			}
			if perr := cli.PrintJSON(cmd, sub); perr != nil {
				return perr
			}
			return err
		}),
	}
	cmd.Flags().StringVar(&inputRef, "input", "sim:ok", "the job's input reference")
	return cmd
}

func newJobStatusCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "status JOB_ID",
		Short: "Print a job's state, the state of the user's money and a sentence for the user",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithJobs(func(cmd *cobra.Command, st *jobs.Service, args []string) error {
			status, err := st.Status(cmd.Context(), args[0])
			if errors.Is(err, ledgerdb.ErrJobNotFound) {
				return fmt.Errorf("job %q: %s", args[0], jobs.NotReceivedMessage)
			}
			if err != nil {
				return err
			}
			return cli.PrintJSON(cmd, status)
		}),
	}
}

func newJobReportCommand() *cobra.Command {
	var attempt int
	var outputRef string
	cmd := &cobra.Command{
		Use:   "report JOB_ID --attempt N --output REF",
		Short: "Report that a job's result landed (late results included); never charges twice",
		Long: `Records the result in the ledger first, then hands it to the job's workflow (or, when that has
closed, to the late-result fallback). When Temporal cannot be reached the result stays recorded and
the reconcile pass applies it later ("path": "recorded"). An attempt below 1 or beyond the attempts
the job has started, or an empty output, is refused with nothing written.`,
		Args: cobra.ExactArgs(1),
		RunE: cli.WithJobs(func(cmd *cobra.Command, st *jobs.Service, args []string) error {
			report, err := st.ReportResult(cmd.Context(), args[0], activities.WorkResult{
				Attempt: attempt, OutputRef: outputRef, FinishedAt: time.Now().UTC(),
			})
			if err != nil {
				return err
			}
			return cli.PrintJSON(cmd, report)
		}),
	}
	cmd.Flags().IntVar(&attempt, "attempt", 1, "the attempt that produced the result (one the job's work has started)")
	cmd.Flags().StringVar(&outputRef, "output", "", "where the result is (required)")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func newJobDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete JOB_ID",
		Short: "Delete a settled job: its ID is burnt forever, its money stays as it was",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithJobs(func(cmd *cobra.Command, st *jobs.Service, args []string) error {
			status, err := st.Delete(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			return cli.PrintJSON(cmd, status)
		}),
	}
}

func newJobRedriveCommand() *cobra.Command {
	var by, note string
	cmd := &cobra.Command{
		Use:   "redrive JOB_ID",
		Short: "Run a dead-lettered (refunded) job's work again; on success the refund is reclaimed",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithJobs(func(cmd *cobra.Command, st *jobs.Service, args []string) error {
			status, err := st.Redrive(cmd.Context(), args[0], by, note)
			if err != nil {
				return err
			}
			return cli.PrintJSON(cmd, status)
		}),
	}
	cmd.Flags().StringVar(&by, "by", "cli", "who asks, for the timeline")
	cmd.Flags().StringVar(&note, "note", "", "why")
	return cmd
}
