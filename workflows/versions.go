package workflows

import "go.temporal.io/sdk/workflow"

// Versioning. A metered job's workflow stays open for at least its late-result window (a day by
// default), so a deployment always meets runs that started under the code before it, and a
// worker must replay those runs exactly as they were recorded. Every change to the commands a
// workflow issues (an activity or local activity added, removed or reordered, a search-attribute
// upsert, a timer) therefore goes through workflow.GetVersion: each run records, once, at its
// start, the newest version its code knew, and the code keeps the older paths for runs recorded
// under them. workflows/testdata/histories keeps a recorded history of every path of every
// released version, never re-recorded, and the replay test replays them all.
//
// To change the commands: add a version constant below (the next number), make it
// latestMeteredJobVersion, branch on j.version where the behaviour differs, record the new
// version's histories beside the old ones (their files start with the version, as v1-…), and keep
// the old branches until no run of the old version can still be open.

// meteredJobVersionID is the change ID under which [MeteredJob] records its version.
const meteredJobVersionID = "metered-job"

const (
	// versionOriginal is the first released MeteredJob: reclaim and deliver as two steps, an
	// upsert of the submitting state at start, the workflow ID equal to the job ID.
	versionOriginal = workflow.DefaultVersion
	// versionDoors keeps the money right at every door: the workflow ID carries the account, an
	// invalid input, signal or update payload is refused without failing the run, a run started
	// without a placeholder writes its own, a result is settled in one ledger step, a cancelled
	// run refunds as "stopped by an operator", a heal run refunds a job whose earlier run ended
	// unsettled, and a ledger step the database refuses for good raises an alarm.
	// No branch names it (they test the versions after it), but it stays declared: its runs
	// replay, and its number is taken.
	//lint:ignore U1000 a released version, declared for the runs recorded under it
	versionDoors workflow.Version = 1
	// versionPrices takes prices from the price list: the input names a kind and carries no
	// amount (one that does is refused), a run started without a placeholder writes it at the
	// kind's price, the summaries show the ledger's figures, and a result is settled with the
	// units its work used.
	versionPrices workflow.Version = 2
	// versionContract reads the published JSON contract (contract.go; the commands are those of
	// versionPrices), and ends rejected, with the ledger's reason, a run whose own placeholder
	// the ledger refused as invalid (a maximum of units above the kind's), where earlier runs
	// raised an alarm.
	versionContract workflow.Version = 3
	// versionWholeNumbers reads an integer of the input or of a signal written with a zero
	// fraction or an exponent (50.0, 5e1) as that integer, as JSON Schema does (package
	// internal/jsonint), where earlier runs refused it; and raises an alarm, once per run, for a
	// result signal it cannot bill while the job could still take one, where earlier runs only
	// counted it.
	versionWholeNumbers workflow.Version = 4
	// versionLedgerTruth keeps a refused start from contradicting the ledger in the UI: a run
	// refused because the job's ID holds another request, or a tombstone, upserts the job's search
	// attributes with what the ledger answered about the job (a settled job's state, not
	// rejected), and a run refused before it asked the ledger (an invalid input) upserts none.
	versionLedgerTruth workflow.Version = 5
	// latestMeteredJobVersion is the version new runs record.
	latestMeteredJobVersion = versionLedgerTruth
)

// lateResultVersionID is the change ID under which [LateResult] records its version.
const lateResultVersionID = "late-result"

const (
	// lateResultOriginal reclaims only: a result for a job still running was not billed.
	lateResultOriginal = workflow.DefaultVersion
	// lateResultSettles settles in one step: a running job whose workflow closed unsettled is
	// delivered, a refunded one recovered.
	lateResultSettles workflow.Version = 1
)
