package activities

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"
)

// SimulatedRunner stands in for a GPU service so the seeds' stories can be replayed on any
// machine: work that takes a while, work that fails now and then, and work that finishes after
// Temporal gave up on it and reports its result late.
//
// The zero value finishes every attempt at once. It is safe for concurrent use.
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
	// Reporter takes the late result. The starter implements it; without one the result is
	// logged and dropped.
	Reporter LateResultReporter
	// Logger logs reporter failures; slog.Default() when nil.
	Logger *slog.Logger

	mu  sync.Mutex
	rng *rand.Rand
}

// Run works one attempt as configured. It returns ctx's error as soon as ctx is done.
func (s *SimulatedRunner) Run(ctx context.Context, req WorkRequest) (WorkResult, error) {
	if s.LateAttempt > 0 && req.Attempt <= s.LateAttempt {
		if req.Attempt == s.LateAttempt {
			s.finishLate(ctx, req)
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
	if s.fails() {
		return WorkResult{}, fmt.Errorf("simulated GPU failure on attempt %d of job %q", req.Attempt, req.JobID)
	}
	return s.result(req), nil
}

// finishLate starts the part of the work that outlives the attempt: it ends LateBy after the
// attempt's deadline (or after LateBy, without a deadline) and reports the result.
func (s *SimulatedRunner) finishLate(ctx context.Context, req WorkRequest) {
	wait := s.LateBy
	if deadline, ok := ctx.Deadline(); ok {
		wait += time.Until(deadline)
	}
	// The report must not die with the attempt's context; it keeps only its values.
	reportCtx := context.WithoutCancel(ctx)
	time.AfterFunc(wait, func() {
		res := s.result(req)
		if s.Reporter == nil {
			s.logger().Warn("late result with no reporter; dropped", "job_id", req.JobID, "attempt", req.Attempt)
			return
		}
		if err := s.Reporter.ReportLateResult(reportCtx, req.JobID, res); err != nil {
			s.logger().Error("reporting a late result failed", "job_id", req.JobID, "attempt", req.Attempt, "error", err)
		}
	})
}

func (s *SimulatedRunner) result(req WorkRequest) WorkResult {
	return WorkResult{
		Attempt:    req.Attempt,
		OutputRef:  fmt.Sprintf("sim://%s/attempt-%d", req.JobID, req.Attempt),
		FinishedAt: time.Now(),
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
