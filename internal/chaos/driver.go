package chaos

// The driver: the run's bookkeeping and log, its worker processes, and the submissions with the
// follow-ups each job's plan asks for, retried across restarts.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/internal/devserver"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

type run struct {
	cfg       Config
	out       io.Writer
	start     time.Time
	prefix    string
	taskQueue string
	namespace string
	accounts  []string

	ledger *ledgerdb.Store
	tc     client.Client
	st     *jobs.Service
	server *devserver.Server
	procs  []*workerProc

	passes  *passWatcher
	faults  *faults
	credits *creditMix

	mu         sync.Mutex
	injections map[string]int
	anomalies  []string
	submitted  map[string]bool   // the jobs whose submission has answered, by ID
	terminated []ledgerdb.JobKey // the jobs whose running workflow was terminated
	recorded   []ledgerdb.JobKey // the jobs whose result was recorded while the dev server was down
	transient  atomic.Int64
}

// event prints one line with the run's clock and counts it under kind.
func (r *run) event(kind, format string, args ...any) {
	r.mu.Lock()
	r.injections[kind]++
	r.mu.Unlock()
	r.logf(kind, format, args...)
}

// logf prints one line with the run's clock, as event does, without counting it.
func (r *run) logf(kind, format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.out, "[%8.3fs] %-16s %s\n", time.Since(r.start).Seconds(), kind, fmt.Sprintf(format, args...))
}

func (r *run) anomaly(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.anomalies = append(r.anomalies, msg)
	r.mu.Unlock()
	r.event("ANOMALY", "%s", msg)
}

// startWorkers starts the run's two supervised worker processes; the returned stop ends them.
func (r *run) startWorkers(env []string, workDir string) (stop func()) {
	for i := range 2 {
		w := &workerProc{id: i + 1, bin: r.cfg.Binary, env: env, event: r.event,
			logFile: filepath.Join(workDir, fmt.Sprintf("worker-%d.log", i+1)), done: make(chan struct{})}
		r.procs = append(r.procs, w)
		go w.supervise()
	}
	return func() {
		for _, w := range r.procs {
			w.stop()
		}
	}
}

// drive submits the planned jobs while the timeline's injections fire, waits for their follow-ups,
// and then for the run to be at rest, the scheduled passes watched from the start: the faults the
// run leaves behind are repaired by them while it goes on, and each must be within HealPasses of
// its own.
func (r *run) drive(ctx context.Context, plans []jobPlan, timeline []timedInjection) error {
	r.passes = &passWatcher{tc: r.tc, log: r.logf}
	r.faults = &faults{}
	watchCtx, stopWatching := context.WithCancel(ctx)
	defer stopWatching()
	var watcher sync.WaitGroup
	watcher.Go(func() { r.watch(watchCtx) })

	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var injectors sync.WaitGroup
	injectors.Go(func() { r.inject(runCtx, timeline) })
	injectors.Go(func() { r.settlePending(runCtx) })
	var followUps sync.WaitGroup
	r.submitAll(runCtx, plans, &followUps)
	injectors.Wait()
	followUps.Wait()
	if ctx.Err() != nil {
		return ctx.Err()
	}

	r.settle(ctx)
	stopWatching()
	watcher.Wait()
	return nil
}

// workerEnv is the workers' environment: the driver's own without any JOBBILL_* variable (an
// operator's settings must not leak into the run), then the run's settings, among them the
// reconcile schedule's, which each worker creates or updates at start as in a deployment.
func workerEnv(w config.Config, c Config) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "JOBBILL_") {
			env = append(env, kv)
		}
	}
	p := c.Policy
	set := map[string]string{
		"database_url":                w.DatabaseURL,
		"temporal.address":            w.Temporal.Address,
		"temporal.task_queue":         w.Temporal.TaskQueue,
		"metrics.listen":              "127.0.0.1:0",
		"log.level":                   "warn",
		"policy.initial_interval":     p.InitialInterval.String(),
		"policy.backoff_coefficient":  fmt.Sprint(p.BackoffCoefficient),
		"policy.maximum_interval":     p.MaximumInterval.String(),
		"policy.maximum_attempts":     fmt.Sprint(p.MaximumAttempts),
		"policy.start_to_close":       p.StartToClose.String(),
		"policy.heartbeat_timeout":    p.HeartbeatTimeout.String(),
		"policy.late_result_window":   p.LateResultWindow.String(),
		"runner.kind":                 "simulated",
		"runner.simulated.duration":   c.SimulatedDuration.String(),
		"runner.simulated.late_by":    c.LateBy.String(),
		"reconcile.interval":          w.Reconcile.Interval.String(),
		"reconcile.grace":             w.Reconcile.Grace.String(),
		"reconcile.result_grace":      w.Reconcile.ResultGrace.String(),
		"expiry.interval":             w.Expiry.Interval.String(),
		"webhooks.enabled":            fmt.Sprint(w.Webhooks.Enabled),
		"webhooks.allow_private_urls": fmt.Sprint(w.Webhooks.AllowPrivateURLs),
		"webhooks.poll_interval":      w.Webhooks.PollInterval.String(),
		"webhooks.timeout":            w.Webhooks.Timeout.String(),
		"webhooks.max_age":            w.Webhooks.MaxAge.String(),
		"webhooks.initial_backoff":    w.Webhooks.InitialBackoff.String(),
		"webhooks.max_backoff":        w.Webhooks.MaxBackoff.String(),
	}
	keys := make([]string, 0, len(set))
	for k := range set {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		env = append(env, config.EnvName(k)+"="+set[k])
	}
	return env
}

// openAccounts sets the run's price list and opens its accounts with their credit mix
// (planCredits): the rich ones can pay for every job twice over, the poor one for about three
// until its automatic top-ups are paid, so that the mix includes refusals. The poor account's
// endpoint and top-up rule are set before its grants.
func (r *run) openAccounts(ctx context.Context) error {
	prices := []ledgerdb.Price{{Kind: meteredKind, Unit: ledgerdb.UnitGPUSecond, UnitPrice: meteredPrice, MaxUnits: meteredMax, Memo: "chaos run"}}
	for cost := int64(1); cost <= maxCost; cost++ {
		prices = append(prices, ledgerdb.Price{Kind: fixedKind(cost), Unit: ledgerdb.UnitJob, UnitPrice: cost, MaxUnits: 1, Memo: "chaos run"})
	}
	for _, p := range prices {
		if _, _, err := r.ledger.SetPrice(ctx, p); err != nil {
			return err
		}
	}
	for _, id := range r.accounts {
		if _, err := r.ledger.OpenAccount(ctx, id); err != nil {
			return err
		}
		if id == r.credits.rule.AccountID {
			if err := r.openTopUps(ctx); err != nil {
				return err
			}
		}
		if err := r.grantCredits(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// final reports errors that are answers, not outages: retrying them would change nothing. A result
// reported for a job that was never charged (ErrNotStarted) is one: retried, it would be retried
// until the retry deadline, minutes, while the run waits on it.
func final(err error) bool {
	for _, e := range []error{ledgerdb.ErrGone, ledgerdb.ErrConflict, ledgerdb.ErrInsufficientCredits,
		ledgerdb.ErrJobActive, ledgerdb.ErrJobNotFound, ledgerdb.ErrInvalidInput, ledgerdb.ErrUnknownAccount,
		ledgerdb.ErrNotStarted, ledgerdb.ErrRejected} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// retry calls f until it succeeds or answers a final error, for up to three minutes: while
// Temporal or Postgres restarts, calls fail and must be repeated, with the same job ID, exactly as
// a real client would.
func (r *run) retry(ctx context.Context, f func(ctx context.Context) error) error {
	deadline := time.Now().Add(3 * time.Minute)
	backoff := 200 * time.Millisecond
	for {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err := f(cctx)
		cancel()
		if err == nil || final(err) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		r.transient.Add(1)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 3*time.Second)
	}
}

// submitAll submits the jobs at the planned pace and starts each job's follow-ups.
func (r *run) submitAll(ctx context.Context, plans []jobPlan, followUps *sync.WaitGroup) {
	sem := make(chan struct{}, r.cfg.Concurrency)
	var submits sync.WaitGroup
	begin := time.Now()
	for i := range plans {
		p := plans[i]
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(begin.Add(p.submitAtOffset))):
		}
		sem <- struct{}{}
		submits.Go(func() {
			defer func() { <-sem }()
			err := r.retry(ctx, func(ctx context.Context) error {
				_, err := r.st.Submit(ctx, p.job)
				return err
			})
			if err != nil && !errors.Is(err, ledgerdb.ErrInsufficientCredits) {
				r.anomaly("submitting %s failed: %v", p.job.ID, err)
				return
			}
			r.mu.Lock()
			r.submitted[p.job.ID] = true
			r.mu.Unlock()
			followUps.Go(func() { r.followUp(ctx, p) })
		})
	}
	submits.Wait()
}

// terminal are the states a job leaves only by a late result (refunded) or a delete.
var terminal = []ledgerdb.State{ledgerdb.StateRejected, ledgerdb.StateDelivered, ledgerdb.StateRefunded,
	ledgerdb.StateRecovered, ledgerdb.StateDeleted}

// followUp plays the job's planned duplicate result, delete-and-resubmit or live resubmission.
func (r *run) followUp(ctx context.Context, p jobPlan) {
	switch {
	case p.resubmitLive:
		var sub jobs.Submission
		err := r.retry(ctx, func(ctx context.Context) error {
			var err error
			sub, err = r.st.Submit(ctx, p.job)
			return err
		})
		if (err != nil && !errors.Is(err, ledgerdb.ErrInsufficientCredits)) || !sub.Duplicate || sub.Status.JobID != p.job.ID {
			r.anomaly("resubmitting live %s: want the original job (duplicate), got duplicate=%v job=%q err=%v", p.job.ID, sub.Duplicate, sub.Status.JobID, err)
			return
		}
		r.event(KindResubmitLive, "%s answered the original job (%s)", p.job.ID, sub.Status.State)
	case p.duplicate:
		sleep(ctx, p.followUpDelay)
		res := resultOf(p.job)
		paths := make([]string, 2)
		var both sync.WaitGroup
		for k := range 2 {
			both.Go(func() {
				err := r.retry(ctx, func(ctx context.Context) error {
					rep, err := r.st.ReportResult(ctx, p.job.Key(), res)
					paths[k] = rep.Path
					return err
				})
				switch {
				case errors.Is(err, ledgerdb.ErrNotStarted):
					// The right answer for a job that was never charged (rejected): it has no work
					// whose result could be taken. Wrong for any other.
					paths[k] = "not_started"
					if job, jerr := r.ledger.Job(ctx, p.job.Key()); jerr == nil && job.IsCharged {
						r.anomaly("a result for charged job %s (%s) was refused as never charged: %v", p.job.ID, job.State, err)
					}
				case err != nil:
					paths[k] = "error: " + err.Error()
				}
			})
		}
		both.Wait()
		r.event(KindDuplicateResult, "%s (%s) result reported twice: %s, %s", p.job.ID, p.job.InputRef, paths[0], paths[1])
	case p.terminate:
		sleep(ctx, p.followUpDelay/4)
		r.terminate(ctx, p)
	case p.reset:
		sleep(ctx, p.followUpDelay/4)
		r.reset(ctx, p)
	case p.deleteAfter:
		state, err := r.waitSettled(ctx, p.job.Key())
		if err != nil {
			r.anomaly("%s never settled before its delete: %v", p.job.ID, err)
			return
		}
		if err := r.retry(ctx, func(ctx context.Context) error { _, err := r.st.Delete(ctx, p.job.Key()); return err }); err != nil {
			r.anomaly("deleting settled %s (%s): %v", p.job.ID, state, err)
			return
		}
		err = r.retry(ctx, func(ctx context.Context) error { _, err := r.st.Submit(ctx, p.job); return err })
		if !errors.Is(err, ledgerdb.ErrGone) {
			r.anomaly("resubmitting deleted %s: want ErrGone, got %v", p.job.ID, err)
			return
		}
		r.event(KindDeleteResubmit, "%s deleted when %s; resubmission answered ErrGone", p.job.ID, state)
	}
}

// resultOf is the result the driver reports for job, as its GPU service would: attempt 1's, with
// no usage (billed the whole hold).
func resultOf(job jobs.Job) activities.WorkResult {
	return activities.WorkResult{Attempt: 1, OutputRef: "chaos://" + job.ID, FinishedAt: time.Now()}
}

// waitSettled waits, for up to QuiesceTimeout, until the job is in one of the terminal states and
// answers that state. With reads on it waits as a user polling the job does, through the job
// service's status read (which heals on read); with reads off it polls the ledger itself, so that
// only the scheduled pass heals.
func (r *run) waitSettled(ctx context.Context, key ledgerdb.JobKey) (ledgerdb.State, error) {
	ctx, cancel := context.WithTimeout(ctx, r.cfg.QuiesceTimeout)
	defer cancel()
	var state ledgerdb.State
	// Each try waits on ctx, not on the retry's per-call deadline: settling may take minutes.
	err := r.retry(ctx, func(context.Context) error {
		if r.cfg.Reads {
			st, err := r.st.Wait(ctx, key, terminal...)
			state = st.State
			return err
		}
		for {
			job, err := r.ledger.Job(ctx, key)
			if err != nil {
				return err
			}
			if state = job.State; slices.Contains(terminal, state) {
				return nil
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("job %s still %s: %w", key, state, ctx.Err())
			case <-time.After(200 * time.Millisecond):
			}
		}
	})
	return state, err
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}
