package activities

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jobbill/jobbill/ledgerdb"
)

// SimulatedRunner stands in for a GPU service so the stories can be replayed on any
// machine: work that takes a while, work that fails now and then, and work that finishes after
// Temporal gave up on it and reports its result late.
//
// The zero value finishes every attempt at once. It is safe for concurrent use.
//
// Tests whose outcome must not depend on how loaded the machine is end the work themselves:
// a "sim:hold" job works until the test releases it ([SimulatedRunner.ReleaseDir]), and a
// "sim:hang" job never finishes, so that only a timeout or a reported result ends it.
type SimulatedRunner struct {
	// Duration is how long an attempt works before it finishes.
	Duration time.Duration
	// FailureRate is the chance, from 0 to 1, that an attempt fails (retryably) after Duration.
	FailureRate float64
	// Seed seeds the failure draws, so a demo fails the same attempts every run.
	Seed uint64

	// LateAttempt, when above zero, makes the work "finish after the timeout": every attempt up to
	// and including LateAttempt ignores its deadline and never answers Temporal, and attempt
	// LateAttempt finishes LateBy after its deadline and hands its result to Reporter. Attempts
	// after LateAttempt behave normally.
	LateAttempt int
	// LateBy is how long after the attempt's deadline the late result comes.
	LateBy time.Duration
	// Reporter takes the late result. The job service implements it; without one the result is
	// logged and dropped.
	Reporter LateResultReporter
	// Logger logs reporter failures; slog.Default() when nil.
	Logger *slog.Logger

	// ReleaseDir is where "sim:hold" jobs are released: an attempt of such a job works until a
	// file named after the job's ID exists in it (looked for every [ReleasePoll]), and so does
	// every later attempt, which then finishes at once. Empty refuses "sim:hold".
	ReleaseDir string

	mu  sync.Mutex
	rng *rand.Rand
}

// Run works one attempt: as the job's input reference says when it names a scenario (see
// [ParseScenario]), otherwise as the runner is configured. It returns ctx's error as soon as ctx
// is done. A result reports as its usage the GPU-seconds the attempt took, rounded up, or the
// usage the scenario names.
func (s *SimulatedRunner) Run(ctx context.Context, req WorkRequest) (WorkResult, error) {
	started := time.Now()
	sc, ok := ParseScenario(req.InputRef)
	if !ok {
		sc = Scenario{Kind: ScenarioConfigured}
	}
	lateAttempt := s.LateAttempt
	switch sc.Kind {
	case ScenarioLate:
		lateAttempt = sc.Attempt
	case ScenarioHang:
		<-ctx.Done()
		return WorkResult{}, ctx.Err()
	case ScenarioHold:
		if err := s.awaitRelease(ctx, req.JobID); err != nil {
			return WorkResult{}, err
		}
		return s.result(req, sc, started), nil
	}
	if lateAttempt > 0 && req.Attempt <= lateAttempt {
		if req.Attempt == lateAttempt {
			s.finishLate(ctx, req, sc, started)
		}
		// The GPU side keeps going, but this attempt never answers: Temporal times it out.
		<-ctx.Done()
		return WorkResult{}, ctx.Err()
	}

	timer := time.NewTimer(s.Duration)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return WorkResult{}, ctx.Err()
	case <-timer.C:
	}
	failed := false
	switch sc.Kind {
	case ScenarioFail:
		failed = true
	case ScenarioSucceedOnAttempt:
		failed = req.Attempt < sc.Attempt
	case ScenarioConfigured:
		failed = s.fails()
	}
	if failed {
		return WorkResult{}, fmt.Errorf("simulated GPU failure on attempt %d of job %q", req.Attempt, req.JobID)
	}
	return s.result(req, sc, started), nil
}

// ScenarioKind names what a simulated job does.
type ScenarioKind string

// The scenarios a job's input reference can ask the simulated runner for.
const (
	// ScenarioConfigured follows the runner's own settings (no scenario in the input reference).
	ScenarioConfigured ScenarioKind = "configured"
	// ScenarioSucceed finishes every attempt after the runner's Duration: "sim:ok".
	ScenarioSucceed ScenarioKind = "ok"
	// ScenarioSucceedOnAttempt fails every attempt before Attempt, then succeeds: "sim:ok-on-attempt:2".
	ScenarioSucceedOnAttempt ScenarioKind = "ok-on-attempt"
	// ScenarioFail fails every attempt, so the job is dead-lettered for good: "sim:fail".
	ScenarioFail ScenarioKind = "fail"
	// ScenarioLate lets every attempt up to Attempt run past its deadline; attempt Attempt then
	// finishes LateBy after its deadline and reports the result late — the seed's story: "sim:late:3".
	ScenarioLate ScenarioKind = "late"
	// ScenarioHang never finishes any attempt, and reports nothing: "sim:hang".
	ScenarioHang ScenarioKind = "hang"
	// ScenarioHold works until the job is released (see [SimulatedRunner.ReleaseDir]), then
	// succeeds: "sim:hold".
	ScenarioHold ScenarioKind = "hold"
)

// Scenario is what one simulated job does, chosen by its input reference so that a single worker
// can play every story of the demo side by side.
type Scenario struct {
	// Kind is the scenario.
	Kind ScenarioKind
	// Attempt is the attempt that succeeds (ok-on-attempt) or reports late (late).
	Attempt int
	// Used, when set, is the usage the result reports, in units of the job's kind, instead of
	// the seconds the attempt took: "sim:ok+used:137" is a job whose GPU service says it used
	// 137 GPU-seconds.
	Used *int64
}

// ScenarioPrefix starts an input reference that names a simulated scenario.
const ScenarioPrefix = "sim:"

// usedSuffix ends a scenario that names its usage: "+used:137".
const usedSuffix = "+used:"

// ParseScenario reads a scenario from an input reference such as "sim:late:3" or
// "sim:ok+used:137". It reports false for a reference that names none (or names one badly), which
// the runner treats as its own settings.
func ParseScenario(inputRef string) (Scenario, bool) {
	spec, ok := strings.CutPrefix(inputRef, ScenarioPrefix)
	if !ok {
		return Scenario{}, false
	}
	var used *int64
	if rest, usage, named := strings.Cut(spec, usedSuffix); named {
		n, err := strconv.ParseInt(usage, 10, 64)
		if err != nil || n < 0 || usage != strconv.FormatInt(n, 10) {
			// Only the canonical form, so that a scenario reads back as it was written.
			return Scenario{}, false
		}
		spec, used = rest, &n
	}
	kind, arg, hasArg := strings.Cut(spec, ":")
	sc := Scenario{Kind: ScenarioKind(kind), Used: used}
	switch sc.Kind {
	case ScenarioSucceed, ScenarioFail, ScenarioHang, ScenarioHold:
		return sc, !hasArg
	case ScenarioSucceedOnAttempt, ScenarioLate:
		n, err := strconv.Atoi(arg)
		if err != nil || n < 1 {
			return Scenario{}, false
		}
		sc.Attempt = n
		return sc, true
	}
	return Scenario{}, false
}

// String is the input reference that asks for the scenario.
func (sc Scenario) String() string {
	ref := ScenarioPrefix + string(sc.Kind)
	if sc.Attempt > 0 {
		ref = fmt.Sprintf("%s:%d", ref, sc.Attempt)
	}
	if sc.Used != nil {
		ref = fmt.Sprintf("%s%s%d", ref, usedSuffix, *sc.Used)
	}
	return ref
}

// ReleasePoll is how often a held attempt looks for its release.
const ReleasePoll = 100 * time.Millisecond

// awaitRelease waits until the job's release file exists in ReleaseDir, or ctx is done (RunWork
// heartbeats meanwhile). Without a usable release directory the job could never be released, so
// the scenario is refused as work that can never succeed, naming the setting, rather than left
// to run until its attempts time out.
func (s *SimulatedRunner) awaitRelease(ctx context.Context, jobID string) error {
	const setting = "runner.simulated.release_dir"
	if s.ReleaseDir == "" {
		return fmt.Errorf("%w: %s%s waits for its release, and %s is not set", ErrWorkPermanent, ScenarioPrefix, ScenarioHold, setting)
	}
	if info, err := os.Stat(s.ReleaseDir); err != nil || !info.IsDir() {
		return fmt.Errorf("%w: %s %q is not a directory", ErrWorkPermanent, setting, s.ReleaseDir)
	}
	// The ledger's ID rule keeps the file inside the directory: no separator, no "..".
	if err := ledgerdb.ValidateID("job_id", jobID); err != nil {
		return fmt.Errorf("%w: %w", ErrWorkPermanent, err)
	}
	release := filepath.Join(s.ReleaseDir, jobID)
	tick := time.NewTicker(ReleasePoll)
	defer tick.Stop()
	for {
		_, err := os.Stat(release)
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("looking for the release of job %q in %s: %w", jobID, setting, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
}

// finishLate starts the part of the work that outlives the attempt: it ends LateBy after the
// attempt's deadline (or after LateBy, without a deadline) and reports the result.
func (s *SimulatedRunner) finishLate(ctx context.Context, req WorkRequest, sc Scenario, started time.Time) {
	wait := s.LateBy
	if deadline, ok := ctx.Deadline(); ok {
		wait += time.Until(deadline)
	}
	// The report must not die with the attempt's context; it keeps only its values.
	reportCtx := context.WithoutCancel(ctx)
	time.AfterFunc(wait, func() {
		res := s.result(req, sc, started)
		if s.Reporter == nil {
			s.logger().Warn("late result with no reporter; dropped", "job_id", req.JobID, "attempt", req.Attempt)
			return
		}
		if err := s.Reporter.ReportLateResult(reportCtx, req.Job(), res); err != nil {
			s.logger().Error("reporting a late result failed", "job_id", req.JobID, "attempt", req.Attempt, "error", err)
		}
	})
}

// result is the attempt's result, with its usage: the scenario's, or the GPU-seconds since the
// attempt started, rounded up.
func (s *SimulatedRunner) result(req WorkRequest, sc Scenario, started time.Time) WorkResult {
	now := time.Now()
	used := sc.Used
	if used == nil {
		seconds := int64(math.Ceil(now.Sub(started).Seconds()))
		used = &seconds
	}
	return WorkResult{
		Attempt:    req.Attempt,
		OutputRef:  fmt.Sprintf("sim://%s/attempt-%d", req.JobID, req.Attempt),
		FinishedAt: now,
		UnitsUsed:  used,
	}
}

func (s *SimulatedRunner) fails() bool {
	if s.FailureRate <= 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.rng == nil {
		s.rng = rand.New(rand.NewPCG(s.Seed, s.Seed^0x9e3779b97f4a7c15))
	}
	return s.rng.Float64() < s.FailureRate
}

func (s *SimulatedRunner) logger() *slog.Logger {
	if s.Logger != nil {
		return s.Logger
	}
	return slog.Default()
}
