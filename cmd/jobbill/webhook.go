package main

import (
	"errors"
	"fmt"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
	"github.com/jobbill/jobbill/webhooks"
)

// newWebhookCommand is `jobbill webhook`: the accounts' webhook endpoints, their delivery logs,
// the deliveries given up, replays and low-balance thresholds, for operators. Like `jobbill key`,
// it connects as the application role and changes things only through the functions the API uses.
func newWebhookCommand() *cobra.Command {
	hook := &cobra.Command{
		Use:   "webhook",
		Short: "Manage accounts' webhook endpoints, read delivery logs and failures, replay events",
		Long: `Every money transition of a job (job.charged, job.rejected, job.delivered, job.refunded,
job.reclaimed), a balance falling below the account's threshold (balance.low), a credit block
granted or expiring (credit.granted, credit.expired) and a debit asking for an automatic top-up
(topup.requested) is an event the workers POST, signed (Standard Webhooks), to each of the account's enabled endpoints: at least
once, in order per job, retried for webhooks.max_age, then marked failed.`,
	}
	hook.AddCommand(newWebhookCreateCommand(), newWebhookListCommand(), newWebhookDeleteCommand(), newWebhookAttemptsCommand(),
		newWebhookFailedCommand(), newWebhookReplayCommand(), newWebhookThresholdCommand())
	return hook
}

// policy is the URL rule of the configuration, which the API and the workers apply too.
func policy() (webhooks.URLPolicy, error) {
	c, err := cli.LoadConfig()
	if err != nil {
		return webhooks.URLPolicy{}, err
	}
	return webhooks.URLPolicy{AllowPrivate: c.Webhooks.AllowPrivateURLs}, nil
}

// hookRefusal says what a refusal of the webhook store means for the command's user.
func hookRefusal(err error, account string) error {
	switch {
	case errors.Is(err, ledgerdb.ErrUnknownAccount):
		return fmt.Errorf("no account %q; nothing was written", account)
	case errors.Is(err, webhooks.ErrEndpointNotFound):
		return fmt.Errorf("account %s has no such endpoint; `jobbill webhook list %s` shows them; nothing was done", account, account)
	}
	return err
}

func newWebhookCreateCommand() *cobra.Command {
	var description string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "create ACCOUNT URL [--description TEXT]",
		Short: "Create a webhook endpoint for an account and print its signing secret, this once",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := policy()
			if err != nil {
				return err
			}
			return cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
				created, err := webhooks.NewStore(store.Pool()).CreateEndpoint(cmd.Context(),
					webhooks.EndpointSpec{AccountID: args[0], URL: args[1], Description: description}, p)
				if err != nil {
					return hookRefusal(err, args[0])
				}
				if asJSON {
					return cli.PrintJSON(cmd, created)
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "endpoint %s created for account %s: %s\n", created.ID, created.AccountID, created.URL)
				fmt.Fprintln(out, "signing secret (shown this once; give it to the receiver's Standard Webhooks verifier):")
				fmt.Fprintln(out, created.Secret)
				return nil
			})(cmd, args)
		},
	}
	cmd.Flags().StringVar(&description, "description", "", "what the endpoint is for")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the endpoint and its secret as JSON")
	return cmd
}

func newWebhookListCommand() *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list ACCOUNT",
		Short: "List an account's webhook endpoints, deleted ones too (never a secret)",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			eps, err := webhooks.NewStore(store.Pool()).Endpoints(cmd.Context(), args[0])
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd, eps)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSTATUS\tCREATED\tURL\tDESCRIPTION")
			for _, e := range eps {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\n", e.ID, e.Status, e.CreatedAt.Format("2006-01-02 15:04:05"), e.URL, e.Description)
			}
			return w.Flush()
		}),
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the endpoints as JSON")
	return cmd
}

func newWebhookDeleteCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "delete ACCOUNT ENDPOINT",
		Short: "Delete a webhook endpoint: it receives nothing more; its log stays (idempotent)",
		Args:  cobra.ExactArgs(2),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			_, outcome, err := webhooks.NewStore(store.Pool()).DeleteEndpoint(cmd.Context(), args[0], args[1])
			if err != nil {
				return hookRefusal(err, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "endpoint %s deleted (%s)\n", args[1], outcome)
			return nil
		}),
	}
}

func newWebhookAttemptsCommand() *cobra.Command {
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "attempts ACCOUNT ENDPOINT [--limit N]",
		Short: "Print an endpoint's delivery log, newest first",
		Args:  cobra.ExactArgs(2),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			log, err := webhooks.NewStore(store.Pool()).Attempts(cmd.Context(), args[0], args[1], 0, limit)
			if err != nil {
				return hookRefusal(err, args[0])
			}
			if asJSON {
				return cli.PrintJSON(cmd, log)
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "AT\tEVENT\tTYPE\tATTEMPT\tSTATUS\tOUTCOME\tNEXT\tERROR")
			for _, a := range log {
				status := "-"
				if a.HTTPStatus != nil {
					status = strconv.Itoa(*a.HTTPStatus)
				}
				fmt.Fprintf(w, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", a.AttemptedAt.Format("2006-01-02 15:04:05"), a.EventID, a.EventType,
					a.Attempt, status, a.Outcome, timeOrDash(a.NextAttemptAt), a.Error)
			}
			return w.Flush()
		}),
	}
	cmd.Flags().IntVar(&limit, "limit", 50, "entries to print (1 to 1000)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the log as JSON")
	return cmd
}

func newWebhookFailedCommand() *cobra.Command {
	var account string
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "failed [--account ACCOUNT]",
		Short: "List deliveries given up after webhooks.max_age, newest first",
		Args:  cobra.NoArgs,
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, _ []string) error {
			failures, err := webhooks.NewStore(store.Pool()).Failures(cmd.Context(), account, limit)
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd, failures)
			}
			if len(failures) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no delivery was given up")
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "FAILED\tACCOUNT\tENDPOINT\tEVENT\tTYPE\tJOB\tATTEMPTS")
			for _, f := range failures {
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\n", f.FailedAt.Format("2006-01-02 15:04:05"), f.AccountID, f.EndpointID,
					f.EventID, f.EventType, orDash(f.JobID), f.Attempts)
			}
			return w.Flush()
		}),
	}
	cmd.Flags().StringVar(&account, "account", "", "only this account's")
	cmd.Flags().IntVar(&limit, "limit", 100, "deliveries to print (1 to 1000)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print them as JSON")
	return cmd
}

func newWebhookReplayCommand() *cobra.Command {
	var event, since string
	cmd := &cobra.Command{
		Use:   "replay ACCOUNT ENDPOINT (--event msg_… | --since TIME)",
		Short: "Send one event, or every event since a time, to an endpoint again (same webhook-id)",
		Args:  cobra.ExactArgs(2),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			r := webhooks.Replay{EventID: event}
			if since != "" {
				at, err := time.Parse(time.RFC3339, since)
				if err != nil {
					return fmt.Errorf(`--since is %q; give an RFC 3339 time such as "2030-01-31T00:00:00Z"; nothing was queued`, since)
				}
				r.Since = &at
			}
			n, err := webhooks.NewStore(store.Pool()).Replay(cmd.Context(), args[0], args[1], r)
			if errors.Is(err, webhooks.ErrUnknownEvent) {
				return fmt.Errorf("account %s has no event %s; nothing was queued", args[0], event)
			}
			if err != nil {
				return hookRefusal(err, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%d %s queued to %s\n", n, plural.Of(n, "delivery", "deliveries"), args[1])
			return nil
		}),
	}
	cmd.Flags().StringVar(&event, "event", "", "the event's ID (msg_…), from the delivery log or `webhook failed`")
	cmd.Flags().StringVar(&since, "since", "", "every event of the account created at or after this RFC 3339 time")
	cmd.MarkFlagsMutuallyExclusive("event", "since")
	cmd.MarkFlagsOneRequired("event", "since")
	return cmd
}

func newWebhookThresholdCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "threshold ACCOUNT (CREDITS | none)",
		Short: "Set the balance below which a debit sends balance.low, or remove it",
		Args:  cobra.ExactArgs(2),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			var threshold *int64
			if args[1] != "none" {
				n, err := strconv.ParseInt(args[1], 10, 64)
				if err != nil {
					return fmt.Errorf("the threshold is %q; give whole credits, or none to remove it; nothing was written", args[1])
				}
				threshold = &n
			}
			outcome, err := webhooks.NewStore(store.Pool()).SetLowBalanceThreshold(cmd.Context(), args[0], threshold)
			if err != nil {
				return hookRefusal(err, args[0])
			}
			fmt.Fprintf(cmd.OutOrStdout(), "account %s low-balance threshold %s (%s)\n", args[0], args[1], outcome)
			return nil
		}),
	}
}
