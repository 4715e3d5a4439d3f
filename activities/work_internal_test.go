package activities

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// blockingRunner ignores everything but its context, like a GPU call in flight.
type blockingRunner struct{ started chan struct{} }

func (r blockingRunner) Run(ctx context.Context, _ WorkRequest) (WorkResult, error) {
	close(r.started)
	<-ctx.Done()
	return WorkResult{}, ctx.Err()
}

// TestRunWithHeartbeatsHonoursCancellation protects the workflow's step 3 (docs/design.md): when a result signal
// cancels the running attempt, the activity gives up at once (and cancels the runner) instead of
// holding a worker slot, and it heartbeats while it waits, since heartbeats are how Temporal's
// cancellation reaches it.
func TestRunWithHeartbeatsHonoursCancellation(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := blockingRunner{started: make(chan struct{})}
	var beats atomic.Int32
	errc := make(chan error, 1)
	go func() {
		_, err := runWithHeartbeats(ctx, r, WorkRequest{JobID: "j", Attempt: 1}, time.Millisecond, func() { beats.Add(1) })
		errc <- err
	}()
	<-r.started
	time.Sleep(10 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if err != context.Canceled {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("runWithHeartbeats did not return after cancellation")
	}
	if beats.Load() < 2 {
		t.Fatalf("heartbeats = %d, want several while the runner works", beats.Load())
	}
}

// TestParseScenario checks the input references that pick a simulated story, with and without
// the usage they report ("+used:N", the GPU-seconds the result says it used, which the ledger
// settles the job at), that each scenario's String() is the reference it was read from, and that
// a malformed one — a negative or non-numeric usage among them — falls back to the runner's own
// settings rather than to a surprise.
func TestParseScenario(t *testing.T) {
	used := func(n int64) *int64 { return &n }
	for ref, want := range map[string]Scenario{
		"sim:ok":                          {Kind: ScenarioSucceed},
		"sim:fail":                        {Kind: ScenarioFail},
		"sim:hang":                        {Kind: ScenarioHang},
		"sim:hold":                        {Kind: ScenarioHold},
		"sim:hold+used:7":                 {Kind: ScenarioHold, Used: used(7)},
		"sim:late:3":                      {Kind: ScenarioLate, Attempt: 3},
		"sim:ok-on-attempt:2":             {Kind: ScenarioSucceedOnAttempt, Attempt: 2},
		"sim:ok+used:137":                 {Kind: ScenarioSucceed, Used: used(137)},
		"sim:ok+used:0":                   {Kind: ScenarioSucceed, Used: used(0)},
		"sim:late:3+used:90":              {Kind: ScenarioLate, Attempt: 3, Used: used(90)},
		"sim:ok-on-attempt:2+used:45":     {Kind: ScenarioSucceedOnAttempt, Attempt: 2, Used: used(45)},
		"sim:ok+used:9223372036854775807": {Kind: ScenarioSucceed, Used: used(math.MaxInt64)},
	} {
		got, ok := ParseScenario(ref)
		if !ok || !sameScenario(got, want) {
			t.Errorf("ParseScenario(%q) = %s, %v; want %s", ref, fmtScenario(got), ok, fmtScenario(want))
		}
		if got.String() != ref {
			t.Errorf("%s.String() = %q; want %q", fmtScenario(got), got.String(), ref)
		}
	}
	for _, ref := range []string{"", "s3://bucket/input", "sim:", "sim:late", "sim:late:0", "sim:late:x", "sim:ok:1", "sim:hold:1", "sim:explode",
		"sim:ok+used:-1", "sim:ok+used:x", "sim:ok+used:", "sim:ok+used:1.5", "sim:ok+used:1e3", "sim:ok+used:9223372036854775808",
		"sim:ok+used:1+used:2", "sim:+used:5", "sim:late+used:5", "sim:late:0+used:5", "sim:explode+used:5", "sim:ok+used:5:6",
		"s3://bucket/input+used:5"} {
		if got, ok := ParseScenario(ref); ok {
			t.Errorf("ParseScenario(%q) = %s; want no scenario", ref, fmtScenario(got))
		}
	}
}

// sameScenario compares two scenarios by value, their usage included.
func sameScenario(a, b Scenario) bool {
	if a.Kind != b.Kind || a.Attempt != b.Attempt || (a.Used == nil) != (b.Used == nil) {
		return false
	}
	return a.Used == nil || *a.Used == *b.Used
}

func fmtScenario(sc Scenario) string {
	used := "none"
	if sc.Used != nil {
		used = strconv.FormatInt(*sc.Used, 10)
	}
	return fmt.Sprintf("{Kind:%s Attempt:%d Used:%s}", sc.Kind, sc.Attempt, used)
}

// TestSimulatedRunnerReportsUsage checks the usage a simulated result carries, which the ledger
// settles a metered job at (the price-list rule: the usage, never an amount): the scenario's
// "+used:N" when it names one — on time, on the attempt that succeeds, and in a late result — and
// otherwise the GPU-seconds the attempt took, rounded up (a few milliseconds bill one second; just
// over a second, two).
func TestSimulatedRunnerReportsUsage(t *testing.T) {
	ctx := context.Background()
	r := &SimulatedRunner{Duration: time.Millisecond}
	for ref, want := range map[string]int64{
		"sim:ok+used:137":             137,
		"sim:ok+used:0":               0,
		"sim:ok":                      1,
		"s3://bucket/input":           1,
		"sim:ok-on-attempt:1+used:45": 45,
	} {
		res, err := r.Run(ctx, WorkRequest{JobID: "j", Attempt: 1, InputRef: ref})
		if err != nil {
			t.Fatalf("%s: %v", ref, err)
		}
		if res.UnitsUsed == nil || *res.UnitsUsed != want {
			t.Errorf("%s: units used %v; want %d", ref, res.UnitsUsed, want)
		}
	}

	slow := &SimulatedRunner{Duration: 1100 * time.Millisecond}
	res, err := slow.Run(ctx, WorkRequest{JobID: "j", Attempt: 1, InputRef: "sim:ok"})
	if err != nil || res.UnitsUsed == nil || *res.UnitsUsed != 2 {
		t.Errorf("1.1 s of work: %+v, %v; want 2 units used", res, err)
	}

	// A late result reports the scenario's usage, or the seconds from the attempt's start to the
	// late finish, rounded up.
	for ref, want := range map[string]int64{"sim:late:1+used:90": 90, "sim:late:1": 1} {
		reported := make(chan WorkResult, 1)
		late := &SimulatedRunner{LateBy: 5 * time.Millisecond, Reporter: LateResultReporterFunc(func(_ context.Context, _ ledgerdb.JobKey, res WorkResult) error {
			reported <- res
			return nil
		})}
		attemptCtx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
		if _, err := late.Run(attemptCtx, WorkRequest{JobID: "j", Attempt: 1, InputRef: ref}); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("%s: the late attempt ended with %v; want its deadline", ref, err)
		}
		cancel()
		select {
		case res := <-reported:
			if res.UnitsUsed == nil || *res.UnitsUsed != want {
				t.Errorf("%s: the late result reports units used %v; want %d", ref, res.UnitsUsed, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: no late result", ref)
		}
	}
}

// TestSimulatedScenarios runs the runner's scenarios on real clocks, briefly.
func TestSimulatedScenarios(t *testing.T) {
	r := &SimulatedRunner{Duration: time.Millisecond}
	ctx := context.Background()
	if _, err := r.Run(ctx, WorkRequest{JobID: "j", Attempt: 1, InputRef: "sim:fail"}); err == nil {
		t.Error("sim:fail succeeded")
	}
	if _, err := r.Run(ctx, WorkRequest{JobID: "j", Attempt: 1, InputRef: "sim:ok-on-attempt:2"}); err == nil {
		t.Error("sim:ok-on-attempt:2 succeeded on attempt 1")
	}
	res, err := r.Run(ctx, WorkRequest{JobID: "j", Attempt: 2, InputRef: "sim:ok-on-attempt:2"})
	if err != nil || res.Attempt != 2 {
		t.Errorf("sim:ok-on-attempt:2 on attempt 2 = %+v, %v", res, err)
	}
	hangCtx, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if _, err := r.Run(hangCtx, WorkRequest{JobID: "j", Attempt: 1, InputRef: "sim:hang"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("sim:hang ended with %v; want the deadline", err)
	}
}

// TestAccountOfWorkflowID checks the fallback of a RunWork scheduled before the work request
// carried its account: the account is read back from the job's workflow ID, so the attempt is
// recorded on the right account's job (and never on another tenant's of the same ID).
func TestAccountOfWorkflowID(t *testing.T) {
	for id, want := range map[string]string{
		"job/acme/render-1":  "acme",
		"job/acme/":          "acme",
		"late-result/acme/x": "",
		"render-1":           "",
		"job/":               "",
	} {
		if got := accountOfWorkflowID(id); got != want {
			t.Errorf("accountOfWorkflowID(%q) = %q, want %q", id, got, want)
		}
	}
}

// TestSimulatedHoldWorksUntilReleased checks "sim:hold", the scenario that lets a test end the
// work when it chooses instead of after a duration a loaded machine may stretch: an attempt
// works (and RunWork heartbeats) until a file named after the job's ID appears in the release
// directory, then succeeds — every later attempt of the job at once — and gives up with its
// context. Without a release directory, or with one that is not a directory, the scenario is
// refused as work that can never succeed, naming the setting: RunWork fails it for good, so the
// job is refunded at once (the net-effect rule: a job whose work is never delivered nets 0) rather
// than left charged and running for ever.
func TestSimulatedHoldWorksUntilReleased(t *testing.T) {
	dir := t.TempDir()
	r := &SimulatedRunner{ReleaseDir: dir}
	ctx := context.Background()

	type answer struct {
		res WorkResult
		err error
	}
	done := make(chan answer, 1)
	go func() {
		res, err := r.Run(ctx, WorkRequest{JobID: "held-1", Attempt: 1, InputRef: "sim:hold+used:7"})
		done <- answer{res, err}
	}()
	// Another job's release does not release this one.
	if err := os.WriteFile(filepath.Join(dir, "held-2"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		t.Fatalf("the held attempt finished before its release: %+v, %v", a.res, a.err)
	case <-time.After(300 * time.Millisecond): // three looks for the file, none finding it
	}
	if err := os.WriteFile(filepath.Join(dir, "held-1"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-done:
		if a.err != nil || a.res.Attempt != 1 || a.res.UnitsUsed == nil || *a.res.UnitsUsed != 7 {
			t.Fatalf("released attempt = %+v, %v; want attempt 1 with 7 units used", a.res, a.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the released attempt did not finish")
	}
	// Released for good: a later attempt finishes at once.
	if res, err := r.Run(ctx, WorkRequest{JobID: "held-1", Attempt: 2, InputRef: "sim:hold"}); err != nil || res.Attempt != 2 {
		t.Errorf("attempt 2 of a released job = %+v, %v", res, err)
	}

	// An attempt of a job never released ends with its context.
	attemptCtx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := r.Run(attemptCtx, WorkRequest{JobID: "held-3", Attempt: 1, InputRef: "sim:hold"}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a held attempt ended with %v; want its deadline", err)
	}

	notDir := filepath.Join(dir, "held-2")
	for _, runner := range []*SimulatedRunner{{}, {ReleaseDir: filepath.Join(dir, "missing")}, {ReleaseDir: notDir}} {
		_, err := runner.Run(ctx, WorkRequest{JobID: "held-4", Attempt: 1, InputRef: "sim:hold"})
		if !errors.Is(err, ErrWorkPermanent) || !strings.Contains(err.Error(), "runner.simulated.release_dir") {
			t.Errorf("sim:hold with release dir %q: %v; want a permanent failure naming runner.simulated.release_dir", runner.ReleaseDir, err)
		}
	}
}
