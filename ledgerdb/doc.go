// Package ledgerdb is jobbill's credit ledger: the Postgres schema, its migrations, and every
// guarded money operation. It knows nothing about Temporal.
//
// # The model
//
// An account holds credits. A job, keyed by the client's job ID, is charged its cost once, may be
// refunded once when its work fails for good, and may have that refund reclaimed once when its
// result lands after all. Each of those moves is a row in ledger_entries, which the database
// refuses to update, delete or truncate; an account's balance is the sum of its rows.
//
// # Guards
//
// Every operation is one database transaction (one round trip: a PL/pgSQL function of its own in
// code/, installed by [Migrate]) whose guard is a conditional write on the job row, as in
//
//	UPDATE jobs SET state = 'refunded', is_refunded = true ...
//	WHERE id = $1 AND state = 'running' AND is_charged AND NOT is_refunded
//
// Only the call whose write matched a row appends the ledger row and moves the balance, so any
// operation may be delivered twice, or concurrently, and the ledger ends the same. Each call says
// what it did through [Outcome]: [Applied], [AlreadyApplied] or [NotApplied].
//
// # Roles
//
// [Migrate] runs as the schema's owner. The service opens its [Store] as the application role
// jobbill_app, which the schema lets read every table and call the money functions, and
// nothing more: it cannot write a table directly (so not rewrite a ledger row either) nor change
// the schema. The functions run as their owner (SECURITY DEFINER), so they are the only way in.
//
// # Errors
//
// Business refusals are sentinel errors for [errors.Is] ([ErrInsufficientCredits], [ErrGone],
// [ErrConflict], [ErrJobNotFound], [ErrUnknownAccount], [ErrJobActive]); bad input is an
// [*InvalidInputError] that wraps [ErrInvalidInput]. Nothing is written when an error is returned.
//
// # Example
//
//	store, err := ledgerdb.Open(ctx, os.Getenv("JOBBILL_DATABASE_URL"))
//	if err != nil { ... }
//	defer store.Close()
//	_, _ = store.OpenAccount(ctx, "acme")
//	_, _ = store.Grant(ctx, ledgerdb.Credit{AccountID: "acme", Amount: 100, Key: "invoice-7"})
//	_, _ = store.Submit(ctx, ledgerdb.Submission{JobID: "render-1", AccountID: "acme", Cost: 40, Request: []byte(`{"scene":"intro"}`)})
//	charge, err := store.Charge(ctx, "render-1") // charge.Outcome == ledgerdb.Applied
package ledgerdb
