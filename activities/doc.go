// Package activities holds jobbill's Temporal activities: thin adapters from the metered job
// workflow to the ledger ([ledgerdb]) and to the GPU work ([Runner]).
//
// Activities are methods on [Activities], a struct holding their dependencies, as in samples-go
// greetings/: the worker registers one value, and the workflow names the methods through a nil
// pointer:
//
//	var a *activities.Activities
//	err := workflow.ExecuteActivity(ctx, a.Charge, activities.ChargeInput{Job: key}).Get(ctx, &res)
//
// # Money
//
// No activity takes an amount. Charge, Refund and Reclaim move the cost recorded on the job row
// (the price-list rule), and each is one guarded ledger transaction, so Temporal may run any of
// them twice (at-least-once delivery, a retry after a lost answer) and the ledger ends the same
// (the idempotent-doors rule): the repeat answers [ledgerdb.AlreadyApplied] or
// [ledgerdb.NotApplied].
//
// # Errors
//
// Business refusals become non-retryable application errors whose types are the ErrorType
// constants ([ErrorTypeInsufficientCredits], [ErrorTypeJobGone], [ErrorTypeJobNotFound], ...), so
// the workflow branches on a stable string rather than on Go type names. Every other error (a lost
// connection, a deadlock victim) stays retryable: the guards make the retry safe.
//
// # Runners
//
// [Activities.RunWork] runs one attempt of the GPU work through a [Runner], heartbeating while it
// waits and giving up when Temporal cancels the attempt. [HTTPRunner] runs it on a real GPU
// service (its doc comment is the service's contract: start, poll, cancel, report late results);
// [SimulatedRunner] replays the stories on any machine.
package activities
