package chaos_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jobbill/jobbill/internal/chaos"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestChaosRun is the CI-sized chaos run: about 200 jobs through two real worker processes and a
// dev server of its own, with every injection but the Postgres restart (other packages' tests use
// the cluster in parallel under `go test ./...`), and nobody reading the jobs through jobbill: only
// the reconcile schedule the workers create heals, as deployed. The money rules it checks: every
// rule the invariant checker audits, across the ledger and Temporal; a terminated job never stays
// charged with no run to settle it (refunded, or settled by its result); a result recorded while
// Temporal was down is billed; an orphaned placeholder is never left "being decided" — each repair
// within HealPasses scheduled passes. Its accounts hold credit blocks, promotional and paid, some
// expiring mid-run, pending grants confirmed or failed mid-run, and an automatic top-up rule whose
// requests a receiver pays over signed webhooks; for them it checks: each block whose expiry
// passed removed by the expiry pass once and holding nothing, no block spent outside its time
// (the audit of every account), a confirmed pending grant written once and a failed one never,
// every top-up request paid once under its key within the month's cap, and the revenue report
// reconciling. Its ledger is the chaos deployment's database: the workers'
// pass reads every account of its database, and on the tests' shared one it would heal other
// tests' jobs. It needs Postgres (scripts/ensure-postgres.sh, which creates that database) and
// the Temporal CLI; it builds the jobbill binary itself.
func TestChaosRun(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run takes a few minutes; skipped with -short")
	}
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("no go toolchain to build the jobbill binary")
	}
	bin, err := chaos.BuildProduct(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}

	d := ledgertest.DeploymentOf(t, ledgertest.DeploymentChaos)
	cfg := chaos.DefaultConfig()
	cfg.Binary = bin
	cfg.DatabaseURL = d.DatabaseURL
	cfg.MigrateDatabaseURL = d.MigrateDatabaseURL
	cfg.Jobs = 200
	cfg.Seed = 20261129
	cfg.RestartTemporal = true
	cfg.RestartPostgres = false
	cfg.Reads = false
	cfg.WorkDir = t.TempDir()
	if os.Getenv("JOBBILL_CHAOS_KEEP") != "" {
		// Keep the dev server's store and the workers' logs for a post-mortem.
		cfg.WorkDir = os.Getenv("JOBBILL_CHAOS_KEEP")
	}

	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	report, err := chaos.Run(ctx, cfg, testWriter{t})
	if err != nil {
		t.Fatalf("chaos run could not be carried out: %v", err)
	}
	for _, v := range report.Violations {
		t.Errorf("violation %s: %s", v.Kind, v.Message)
	}
	for _, a := range report.Anomalies {
		t.Errorf("anomaly: %s", a)
	}
	for _, kind := range []string{chaos.KindKillWorker, chaos.KindRestartWorker, chaos.KindDuplicateResult,
		chaos.KindDeleteResubmit, chaos.KindResubmitLive, chaos.KindRestartTemporal, chaos.KindRecordedResult, chaos.KindOrphan,
		chaos.KindTerminate, chaos.KindReset} {
		if report.Injections[kind] == 0 {
			t.Errorf("no %s was injected (injections: %v)", kind, report.Injections)
		}
	}
	// The credit mix did each of its things at least once, so that its checks (reported above as
	// violations) checked something.
	c := report.Credits
	for what, n := range map[string]int{"block granted": c.BlocksGranted, "block expired mid-run and removed by the pass": c.BlocksExpired,
		"top-up requested": c.TopUpsRequested, "top-up paid": c.TopUpsPaid, "top-up grant posted again under its key": c.TopUpRepeats,
		"pending grant confirmed": c.PendingConfirmed, "pending grant voided": c.PendingVoided} {
		if n == 0 {
			t.Errorf("no %s (credit mix: %+v)", what, c)
		}
	}
	if n := report.Terminated[ledgerdb.StateRunning]; n > 0 {
		t.Errorf("%d terminated jobs left running: never healed (terminated jobs by state: %v)", n, report.Terminated)
	}
	if report.OrphansHealed != report.Orphans {
		t.Errorf("%d of %d orphans healed", report.OrphansHealed, report.Orphans)
	}
	if billed := report.Recorded[ledgerdb.StateDelivered] + report.Recorded[ledgerdb.StateRecovered]; billed != report.Injections[chaos.KindRecordedResult] {
		t.Errorf("%d of %d results recorded while Temporal was down were billed (jobs by state: %v)",
			billed, report.Injections[chaos.KindRecordedResult], report.Recorded)
	}
	// With reads off, only the scheduled pass heals: the terminated jobs settled, the recorded
	// results billed and the orphans healed (all checked above, each kind injected at least once)
	// are its work. Its own counts are not checked: a pass whose worker is killed after it healed
	// is retried, and the retry counts only what the killed attempt's last heartbeat recorded.
	if report.Passes.Completed == 0 {
		t.Errorf("no scheduled pass completed: passes %+v", report.Passes)
	}
}

// testWriter sends the run's log to t.Log, line by line, so that it shows with -v or on failure.
type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Helper()
	w.t.Log(string(trimNewline(p)))
	return len(p), nil
}

func trimNewline(p []byte) []byte {
	if n := len(p); n > 0 && p[n-1] == '\n' {
		return p[:n-1]
	}
	return p
}
