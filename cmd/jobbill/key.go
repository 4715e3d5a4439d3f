package main

import (
	"errors"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/internal/cli"
	"github.com/jobbill/jobbill/ledgerdb"
)

// newKeyCommand is `jobbill key`: the API keys the HTTP API authenticates its callers with.
//
// The commands connect as the application role (database_url), not as the schema's owner
// (migrate_database_url): creating and revoking a key needs only ledger_create_api_key and
// ledger_revoke_api_key, which that role may call, while the owner's credentials could change the
// schema and switch off the triggers that make a revocation final. An operator who may manage
// keys needs no more than the API itself holds.
func newKeyCommand() *cobra.Command {
	key := &cobra.Command{
		Use:   "key",
		Short: "Create, list and revoke the API keys callers of the HTTP API send",
		Long: `Every caller of the HTTP API sends "Authorization: Bearer <secret>" with an API key of one scope:
  customer       one account's jobs (submit, read, delete), balance, ledger and the price list
  customer_read  the same, read only
  runner         the GPU service: only reports results, for every account's jobs
  admin          everything: grants, prices, redrives and keys
Keys are kept in the ledger as the SHA-256 of their secret, which is shown once, when the key is
created. The API reads them on every request: a new key works and a revoked one fails at once,
without a restart.`,
	}
	key.AddCommand(newKeyCreateCommand(), newKeyListCommand(), newKeyRevokeCommand())
	return key
}

func newKeyCreateCommand() *cobra.Command {
	var (
		scope, account, name, expires string
		asJSON                        bool
	)
	cmd := &cobra.Command{
		Use:   "create --scope SCOPE [--account ACCOUNT] --name TEXT [--expires 720h|TIME]",
		Short: "Create an API key and print its secret, this once",
		Long: `Creates an API key and prints its ID and its secret. The secret is not stored anywhere: keep it now,
or revoke the key and create another. A customer or customer_read key needs --account, an account
that exists; runner and admin keys take none. --expires is a duration from now ("720h", "90m") or
an RFC 3339 time ("2030-01-31T00:00:00Z"); without it the key does not expire. Bad input is
refused with nothing written.`,
		Example: `  jobbill key create --scope customer --account acme --name "acme web app" --expires 720h
  jobbill key create --scope runner --name "gpu service, eu-west"
  jobbill key create --scope admin --name "ops: alice"`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			// Checked before connecting: a refused key never reaches the ledger.
			spec, err := keySpecFromFlags(scope, account, name, expires, time.Now())
			if err != nil {
				return err
			}
			return cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, _ []string) error {
				created, err := apikeys.NewStore(store.Pool()).Create(cmd.Context(), spec)
				if errors.Is(err, ledgerdb.ErrUnknownAccount) {
					return fmt.Errorf("--account %q: no such account; open it with `jobbill account open %s`; nothing was written", account, account)
				}
				if err != nil {
					return err
				}
				if asJSON {
					return cli.PrintJSON(cmd, created)
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "key %s created: %s\n", created.ID, describeKey(created.Key))
				fmt.Fprintln(out, "secret (shown this once: it is not stored and cannot be shown again):")
				fmt.Fprintln(out, created.Secret)
				return nil
			})(cmd, args)
		},
	}
	f := cmd.Flags()
	f.StringVar(&scope, "scope", "", "customer, customer_read, runner or admin (required)")
	f.StringVar(&account, "account", "", "the key's one account: required for customer and customer_read, refused for runner and admin")
	f.StringVar(&name, "name", "", "who holds the key or what it is for (required)")
	f.StringVar(&expires, "expires", "", `when the key stops working: a duration from now ("720h") or an RFC 3339 time; default never`)
	f.BoolVar(&asJSON, "json", false, "print the key and its secret as JSON")
	_ = cmd.MarkFlagRequired("scope")
	_ = cmd.MarkFlagRequired("name")
	return cmd
}

// keySpecFromFlags is the key `key create` asks for, checked as the ledger checks it, with its
// errors naming the flags.
func keySpecFromFlags(scope, account, name, expires string, now time.Time) (apikeys.Spec, error) {
	spec := apikeys.Spec{Scope: apikeys.Scope(scope), AccountID: account, Name: name}
	if expires != "" {
		if d, err := time.ParseDuration(expires); err == nil {
			if d <= 0 {
				return spec, fmt.Errorf("--expires is %s; a duration must be above zero; nothing was written", expires)
			}
			at := now.Add(d)
			spec.ExpiresAt = &at
		} else if at, err := time.Parse(time.RFC3339, expires); err == nil {
			spec.ExpiresAt = &at
		} else {
			return spec, fmt.Errorf(`--expires is %q; give a duration such as "720h" (30 days) or an RFC 3339 time such as "2030-01-31T00:00:00Z"; nothing was written`, expires)
		}
	}
	if err := spec.Validate(now); err != nil {
		var invalid *ledgerdb.InvalidInputError
		if errors.As(err, &invalid) {
			flag := map[string]string{"scope": "--scope", "account_id": "--account", "name": "--name", "expires_at": "--expires"}[invalid.Field]
			return spec, fmt.Errorf("%s %s; nothing was written", flag, invalid.Reason)
		}
		return spec, err
	}
	return spec, nil
}

// describeKey says what a key is in a sentence: `customer key for account acme, "acme web app",
// expires 2030-01-31 00:00:00 UTC`.
func describeKey(k apikeys.Key) string {
	who := string(k.Scope) + " key"
	if k.AccountID != "" {
		who += " for account " + k.AccountID
	}
	expiry := "never expires"
	if k.ExpiresAt != nil {
		expiry = "expires " + k.ExpiresAt.Format("2006-01-02 15:04:05 UTC")
	}
	return fmt.Sprintf("%s, %q, %s", who, k.Name, expiry)
}

func newKeyListCommand() *cobra.Command {
	var (
		account string
		asJSON  bool
	)
	cmd := &cobra.Command{
		Use:   "list [--account ACCOUNT]",
		Short: "List API keys, oldest first, with their status (never a secret)",
		Args:  cobra.NoArgs,
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, _ []string) error {
			keys, err := apikeys.NewStore(store.Pool()).List(cmd.Context(), account)
			if err != nil {
				return err
			}
			if asJSON {
				return cli.PrintJSON(cmd, keys)
			}
			if len(keys) == 0 {
				fmt.Fprintln(cmd.OutOrStdout(), "no keys; `jobbill key create --scope SCOPE --name TEXT` makes one")
				return nil
			}
			w := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(w, "ID\tSCOPE\tACCOUNT\tSTATUS\tCREATED\tEXPIRES\tREVOKED\tNAME")
			for _, k := range keys {
				// A name stored before key names came under the ledger's text rule may hold a
				// bidirectional override or a zero-width character: printed as the rule would
				// have kept it, it reads as what it is.
				fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", k.ID, k.Scope, orDash(k.AccountID), k.Status,
					k.CreatedAt.Format("2006-01-02 15:04:05"), timeOrDash(k.ExpiresAt), timeOrDash(k.RevokedAt), ledgerdb.ClipText(k.Name))
			}
			return w.Flush()
		}),
	}
	cmd.Flags().StringVar(&account, "account", "", "only this account's keys")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the keys as JSON")
	return cmd
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func timeOrDash(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Format("2006-01-02 15:04:05")
}

func newKeyRevokeCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "revoke KEY_ID",
		Short: "Revoke an API key for good; the API refuses it from the next request on (idempotent)",
		Args:  cobra.ExactArgs(1),
		RunE: cli.WithLedger(func(cmd *cobra.Command, store *ledgerdb.Store, args []string) error {
			key, outcome, err := apikeys.NewStore(store.Pool()).Revoke(cmd.Context(), args[0])
			if errors.Is(err, apikeys.ErrKeyNotFound) {
				return fmt.Errorf("no API key has ID %s; `jobbill key list` shows them", args[0])
			}
			if err != nil {
				return err
			}
			at := key.RevokedAt.Format("2006-01-02 15:04:05 UTC")
			if outcome == ledgerdb.AlreadyApplied {
				fmt.Fprintf(cmd.OutOrStdout(), "key %s was already revoked at %s; nothing was written (%s)\n", key.ID, at, outcome)
				return nil
			}
			fmt.Fprintf(cmd.OutOrStdout(), "key %s revoked at %s: %s (%s)\n", key.ID, at, describeKey(key), outcome)
			return nil
		}),
	}
}
