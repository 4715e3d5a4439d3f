package workflows

import (
	"fmt"
	"strconv"
	"strings"

	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Versioning. A metered job's workflow stays open for at least its late-result window (a day by
// default), so a deployment always meets runs that started under the code before it, and a
// worker must replay those runs exactly as they were recorded. Every change to the commands a
// workflow issues (an activity or local activity added, removed or reordered, a search-attribute
// upsert, a timer) therefore goes through a version: each run records, once, at its start, the
// newest version its code knew (below: where), and the code keeps the older paths for runs
// recorded under them. workflows/testdata/histories keeps a recorded history of every path of every
// released version, never re-recorded, and the replay test replays them all.
//
// To change the commands: add a version constant below (the next number), make it
// latestMeteredJobVersion, branch on j.version where the behaviour differs, record the new
// version's histories beside the old ones (their files start with the version, as v1-…), and keep
// the old branches until no run of the old version can still be open.
//
// Where a run's version is kept. Up to versionLedgerTruth every run recorded it with GetVersion: a
// Version marker, and beside it the SDK's upsert of the TemporalChangeVersion search attribute,
// which the SDK writes with every first GetVersion of a run and has no switch for — two events of
// every job, and a visibility write, that bill nothing. From versionBuildID on, a run started on a
// worker whose build ID is [WorkerBuildID] keeps its version in that build ID instead: the server
// records the build ID of the worker that completed each workflow task in the task's completion
// event, and the SDK answers the first task's (workflow.GetInfo(ctx).GetCurrentBuildID, documented
// safe for branching) again on every replay, on any worker. So the run's version costs no event:
// it is the number at the end of the build ID of the worker that ran its first task. A run whose
// first task was completed by any other worker (an older jobbill, whose build ID is its binary's
// checksum, or one an operator gave its own build ID) records its version with GetVersion, as
// before; the two paths issue the same commands after it. A worker meeting a run of a version
// newer than its code fails the workflow task, as GetVersion does, until a newer worker takes it.
// Worker Versioning (worker deployments, pinned or auto-upgrade runs) is not used: see "Versioning"
// in docs/design.md.

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
	// versionBuildID keeps the run's version in the build ID of the worker that ran its first
	// workflow task (above) when that is a [WorkerBuildID], and then writes no Version marker and
	// no TemporalChangeVersion upsert; its other commands are versionLedgerTruth's.
	versionBuildID workflow.Version = 6
	// latestMeteredJobVersion is the version new runs record.
	latestMeteredJobVersion = versionBuildID
)

// buildIDPrefix starts every [WorkerBuildID]; the version follows it.
const buildIDPrefix = "jobbill-metered-job-v"

// WorkerBuildID is the build ID of a worker that runs this code: it names the newest version of
// [MeteredJob] the code knows, which the runs whose first workflow task it completes keep as their
// version (above). Every worker of jobbill's workflows carries it ([WorkerDeploymentOptions]).
var WorkerBuildID = buildIDPrefix + strconv.Itoa(int(latestMeteredJobVersion))

// WorkerDeploymentName names jobbill's workers for Temporal (the deployment of their build ID).
const WorkerDeploymentName = "jobbill"

// WorkerDeploymentOptions are the deployment options of every worker that runs jobbill's
// workflows: its build ID, [WorkerBuildID], without Worker Versioning (UseVersioning off: the
// server routes every task of the queue to any worker, as before).
func WorkerDeploymentOptions() sdkworker.DeploymentOptions {
	return sdkworker.DeploymentOptions{
		Version: sdkworker.WorkerDeploymentVersion{DeploymentName: WorkerDeploymentName, BuildID: WorkerBuildID},
	}
}

// meteredJobVersion is the version of this run of [MeteredJob]: the one its first workflow task's
// build ID names, or else the one it recorded with GetVersion (recording the newest on a new run).
func meteredJobVersion(ctx workflow.Context) workflow.Version {
	if v, ok := buildIDVersion(workflow.GetInfo(ctx).GetCurrentBuildID()); ok {
		if v < versionBuildID || v > latestMeteredJobVersion {
			// As GetVersion does: the workflow task fails and is retried, on a newer worker.
			panic(fmt.Sprintf("the run's first workflow task ran on a worker of version %d of %q; this code knows versions %d to %d",
				v, meteredJobVersionID, versionBuildID, latestMeteredJobVersion))
		}
		return v
	}
	return workflow.GetVersion(ctx, meteredJobVersionID, versionOriginal, latestMeteredJobVersion)
}

// buildIDVersion is the version a [WorkerBuildID] names; false for any other build ID.
func buildIDVersion(buildID string) (workflow.Version, bool) {
	digits, ok := strings.CutPrefix(buildID, buildIDPrefix)
	if !ok {
		return 0, false
	}
	// Digits only, as WorkerBuildID writes them: no sign, no leading zero.
	v, err := strconv.Atoi(digits)
	if err != nil || v < 0 || strconv.Itoa(v) != digits {
		return 0, false
	}
	return workflow.Version(v), true
}

// lateResultVersionID is the change ID under which [LateResult] records its version.
const lateResultVersionID = "late-result"

const (
	// lateResultOriginal reclaims only: a result for a job still running was not billed.
	lateResultOriginal = workflow.DefaultVersion
	// lateResultSettles settles in one step: a running job whose workflow closed unsettled is
	// delivered, a refunded one recovered.
	lateResultSettles workflow.Version = 1
)
