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
// the cluster in parallel under `go test ./...`). It needs Postgres (scripts/ensure-postgres.sh)
// and the Temporal CLI; it builds the jobbill binary itself.
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

	cfg := chaos.DefaultConfig()
	cfg.Binary = bin
	cfg.DatabaseURL = ledgertest.DatabaseURL()
	cfg.MigrateDatabaseURL = ledgertest.MigrateDatabaseURL()
	cfg.Jobs = 200
	cfg.Seed = 20261129
	cfg.RestartTemporal = true
	cfg.RestartPostgres = false
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
		chaos.KindDeleteResubmit, chaos.KindResubmitLive, chaos.KindRestartTemporal, chaos.KindOrphan, chaos.KindTerminate, chaos.KindReset} {
		if report.Injections[kind] == 0 {
			t.Errorf("no %s was injected (injections: %v)", kind, report.Injections)
		}
	}
	if n := report.Terminated[ledgerdb.StateRunning]; n > 0 {
		t.Errorf("%d terminated jobs left running: never healed (terminated jobs by state: %v)", n, report.Terminated)
	}
	if report.OrphansHealed != report.Orphans {
		t.Errorf("%d of %d orphans healed", report.OrphansHealed, report.Orphans)
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
