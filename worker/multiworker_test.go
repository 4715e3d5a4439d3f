package worker_test

// Several workers: two `jobbill worker` processes — real OS processes, as docker-compose.yml's
// replicas are — poll one task queue of the dev server over one Postgres. The test submits jobs
// through its own job service, reads from each workflow's history which process ran the work, and
// checks every job's ledger rows; then it SIGKILLs one worker while it holds running attempts and
// shows the other finishes them with the money rules intact.
//
// Nothing in it depends on how fast a loaded machine runs: the jobs it kills a worker under are
// held (sim:hold) until the test releases them, and every wait is for an event, with a generous
// deadline.
//
// It needs Postgres and Temporal: the ones the test URLs name, or, with none set, those the tests
// start for the checkout (docs/development.md, "Services and settings").

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/app/connect"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

// multiPolicy: 5 attempts, 200 ms apart and doubling to 1 s, each of at most 5 minutes. The
// heartbeat timeout, 20 s, is how soon an attempt on a killed worker is taken for dead and
// retried on the other. The SDK sends a heartbeat at most every 0.8 × that timeout, so a held
// attempt, which heartbeats until it is released, has 4 s of slack for each one: a loaded
// machine that eats them anyway costs an attempt, of which a job has five, never its delivery.
// A refunded job closes 1 s after its refund.
func multiPolicy() workflows.Policy {
	p := workertest.QuickPolicy()
	p.InitialInterval = 200 * time.Millisecond
	p.MaximumAttempts = 5
	p.StartToClose = 5 * time.Minute
	p.HeartbeatTimeout = 20 * time.Second
	p.LateResultWindow = time.Second
	return p
}

// multiWorkDuration is how long an attempt of a "sim:ok" job works: a sliver of its heartbeat
// timeout, so that it ends long before its first throttled heartbeat is due.
const multiWorkDuration = 200 * time.Millisecond

// eventLimit bounds each wait of the tests for an event — a worker holding an attempt, an
// attempt moving to the other worker: generous, since load only slows them.
const eventLimit = 2 * time.Minute

// workerProcess is one `jobbill worker` process.
type workerProcess struct {
	name string
	cmd  *exec.Cmd
	log  string
	// done is closed once the process has exited and err holds what Wait said.
	done chan struct{}
	err  error
}

// identityPrefix starts the identity the process's worker gives the server: the SDK's default,
// "pid@host@", which differs between processes without any setting.
func (p *workerProcess) identityPrefix() string { return fmt.Sprintf("%d@", p.cmd.Process.Pid) }

// buildJobbill builds the binary once into a temporary directory.
func buildJobbill(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "jobbill")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/jobbill")
	cmd.Dir = ".."
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "go build ./cmd/jobbill:\n%s", out)
	return bin
}

// startWorker runs `jobbill worker` with env on top of this process's environment, minus every
// JOBBILL_ setting, so that the machine's own configuration cannot steer it elsewhere.
func startWorker(t *testing.T, bin, name string, env map[string]string) *workerProcess {
	t.Helper()
	environ := withoutSettings(os.Environ())
	p := &workerProcess{name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	// Each worker serves /metrics on a port of its own (port 0: the kernel picks), as two
	// workers on one host must.
	environ = append(environ, "JOBBILL_METRICS_LISTEN=127.0.0.1:0")
	for k, v := range env {
		environ = append(environ, k+"="+v)
	}
	// The log (stderr by default) and a startup error both land in the file, shown if the test fails.
	logFile, err := os.Create(p.log)
	require.NoError(t, err)
	defer logFile.Close()
	p.cmd = exec.Command(bin, "worker")
	p.cmd.Env = environ
	p.cmd.Stdout, p.cmd.Stderr = logFile, logFile
	require.NoError(t, p.cmd.Start())
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		// SIGTERM: the worker stops cleanly; a process already killed has nothing left to stop.
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			if log, err := os.ReadFile(p.log); err == nil {
				t.Logf("%s (pid %d) log:\n%s", p.name, p.cmd.Process.Pid, log)
			}
		}
	})
	return p
}

// multiJob is a job submitted by the test and what it must end as.
type multiJob struct {
	account, id string
	cost        int64
	kind, input string
	want        ledgerdb.State
}

// key names the job.
func (j multiJob) key() ledgerdb.JobKey { return ledgerdb.JobKey{AccountID: j.account, JobID: j.id} }

// workflowID is the job's workflow ID.
func (j multiJob) workflowID() string { return workflows.JobWorkflowID(j.account, j.id) }

// TestTwoWorkerProcessesShareTheJobs runs two worker processes on one task queue: the jobs are
// spread across both, and every job's ledger rows are right (the reversing-pairs, net-effect and
// sum-of-rows rules). Then one worker is SIGKILLed while running attempts: the other takes them
// over and finishes every job, and the money rules still hold.
func TestTwoWorkerProcessesShareTheJobs(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute) // the build of jobbill included
	defer cancel()
	pair := startWorkerPair(ctx, t, "multi", multiPolicy())
	store, tc, st, a, bw := pair.store, pair.temporal, pair.jobs, pair.a, pair.b

	account := ledgertest.Account(t, store, 10_000)
	var all []multiJob

	// Phase 1: 40 jobs, a quarter of them failing every attempt (refunded).
	phase1 := planJobs(t, store, account, "p1", 40, 4, "sim:ok")
	submitJobs(ctx, t, st, phase1)
	all = append(all, phase1...)
	waitSettled(ctx, t, st, phase1)
	ranBy := map[string]int{}
	for _, j := range phase1 {
		last := lastRunWork(ctx, t, tc, j.workflowID())
		ranBy[whose(t, last.identity, a, bw)]++
	}
	t.Logf("phase 1: %d jobs, work run by %v", len(phase1), ranBy)
	// Each took a fair share; 10% each is far below what an even spread gives, and far above zero.
	require.GreaterOrEqual(t, ranBy[a.name], len(phase1)/10, "worker A ran too few jobs: %v", ranBy)
	require.GreaterOrEqual(t, ranBy[bw.name], len(phase1)/10, "worker B ran too few jobs: %v", ranBy)
	requireLedger(ctx, t, store, account, 10_000, all)

	// Phase 2: 20 more jobs, held until the test releases them but for every fifth, which fails.
	// Once worker A holds an attempt, kill it without warning: each attempt it held must be
	// retried on B, and delivered there once released.
	phase2 := planJobs(t, store, account, "p2", 20, 5, "sim:hold")
	all = append(all, phase2...)
	submitJobs(ctx, t, st, phase2)
	onA := killHolding(ctx, t, tc, phase2, a)
	t.Logf("phase 2: killed %s (pid %d) while it held %d attempts", a.name, a.cmd.Process.Pid, len(onA))
	awaitRetriedOn(ctx, t, tc, account, onA, bw)
	release(t, pair.releaseDir, phase2)

	waitSettled(ctx, t, st, phase2)
	for _, id := range onA {
		last := lastRunWork(ctx, t, tc, workflows.JobWorkflowID(account, id))
		require.Equal(t, bw.name, whose(t, last.identity, a, bw), "job %s: its work was finished by the dead worker?", id)
		require.GreaterOrEqual(t, last.attempt, int32(2), "job %s: the killed attempt must have been retried", id)
	}
	requireLedger(ctx, t, store, account, 10_000, all)
}

// workerPair is two worker processes of the jobbill binary on a task queue of their own, and a
// client and a job service over them.
type workerPair struct {
	store *ledgerdb.Store
	cfg   config.Config
	// releaseDir releases the workers' "sim:hold" jobs (runner.simulated.release_dir).
	releaseDir string
	a, b       *workerProcess
	temporal   client.Client
	jobs       *jobs.Service
}

// startWorkerPair builds jobbill, starts two worker processes in the tests' namespace on a queue
// of name's own (so that no other worker, make run's or another test's, takes its tasks) over the
// worker package's test deployment (whose reconcile pass and webhook deliveries serve only its own
// database, as a deployment's do), dials
// Temporal, makes a job service with policy p, and waits until both workers poll — or the first
// one up would take everything.
func startWorkerPair(ctx context.Context, t *testing.T, name string, p workflows.Policy) workerPair {
	t.Helper()
	d := ledgertest.DeploymentOf(t, ledgertest.DeploymentWorker)
	pair := workerPair{store: d.Store, cfg: workertest.Config(name), releaseDir: t.TempDir()}
	bin := buildJobbill(t)
	env := map[string]string{
		config.EnvName("runner.simulated.release_dir"): pair.releaseDir,
		config.EnvName("database_url"):                 d.DatabaseURL,
		config.EnvName("temporal.address"):             pair.cfg.Temporal.Address,
		config.EnvName("temporal.namespace"):           pair.cfg.Temporal.Namespace,
		config.EnvName("temporal.task_queue"):          pair.cfg.Temporal.TaskQueue,
		config.EnvName("runner.simulated.duration"):    multiWorkDuration.String(),
		config.EnvName("log.level"):                    "info",
	}
	pair.a = startWorker(t, bin, "worker-a", env)
	pair.b = startWorker(t, bin, "worker-b", env)
	tc, err := connect.Dial(ctx, pair.cfg, zap.NewNop(), nil)
	require.NoError(t, err, "Temporal at %s (bash scripts/ensure-temporal.sh, or make temporal-cluster)", pair.cfg.Temporal.Address)
	t.Cleanup(tc.Close)
	pair.temporal = tc
	pair.jobs = jobs.New(jobs.Options{Temporal: tc, Ledger: pair.store, TaskQueue: pair.cfg.Temporal.TaskQueue,
		Namespace: pair.cfg.Temporal.Namespace, Policy: p})
	waitForPollers(ctx, t, tc, pair.cfg.Temporal.TaskQueue, pair.a, pair.b)
	return pair
}

// waitForPollers waits until every process polls both the workflow and the activity task queue.
func waitForPollers(ctx context.Context, t *testing.T, tc client.Client, queue string, procs ...*workerProcess) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		missing := ""
		for _, kind := range []enumspb.TaskQueueType{enumspb.TASK_QUEUE_TYPE_WORKFLOW, enumspb.TASK_QUEUE_TYPE_ACTIVITY} {
			resp, err := tc.DescribeTaskQueue(ctx, queue, kind)
			require.NoError(t, err)
			for _, p := range procs {
				polling := false
				for _, poller := range resp.GetPollers() {
					polling = polling || strings.HasPrefix(poller.GetIdentity(), p.identityPrefix())
				}
				if !polling {
					missing = fmt.Sprintf("%s on the %s queue", p.name, kind)
				}
			}
		}
		if missing == "" {
			return
		}
		for _, p := range procs {
			select {
			case <-p.done:
				t.Fatalf("%s exited before polling: %v", p.name, p.err)
			default:
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s is not polling after 30 s", missing)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// planJobs plans n jobs of the input (a scenario whose work succeeds), every failEvery-th one
// failing every attempt instead, each of a kind sold at its cost.
func planJobs(t *testing.T, store *ledgerdb.Store, account, prefix string, n, failEvery int, input string) []multiJob {
	t.Helper()
	planned := make([]multiJob, n)
	for i := range planned {
		j := multiJob{account: account, id: ledgertest.ID(t, prefix), cost: int64(10 + i%7), input: input, want: ledgerdb.StateDelivered}
		if i%failEvery == failEvery-1 {
			j.input, j.want = "sim:fail", ledgerdb.StateRefunded
		}
		j.kind = ledgertest.Fixed(t, store, j.cost)
		planned[i] = j
	}
	return planned
}

// submitJobs submits the planned jobs at once, and checks each was charged.
func submitJobs(ctx context.Context, t *testing.T, st *jobs.Service, planned []multiJob) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make([]error, len(planned))
	for i, j := range planned {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sub, err := workertest.Submit(ctx, t, st, jobs.Job{ID: j.id, AccountID: j.account, Kind: j.kind, InputRef: j.input})
			if err == nil && sub.Status.State != ledgerdb.StateRunning {
				err = fmt.Errorf("charged into state %s", sub.Status.State)
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
}

// waitSettled waits until every job reaches a final state, and checks it is the one it must end in.
func waitSettled(ctx context.Context, t *testing.T, st *jobs.Service, submitted []multiJob) {
	t.Helper()
	for _, j := range submitted {
		s, err := st.Wait(ctx, j.key(), ledgerdb.StateDelivered, ledgerdb.StateRefunded, ledgerdb.StateRecovered)
		require.NoError(t, err)
		require.Equal(t, j.want, s.State, "job %s", j.id)
	}
}

// runWork is the RunWork attempt that ended a job's work, as its history records it.
type runWork struct {
	identity string
	attempt  int32
}

// lastRunWork reads the job's history for the last started RunWork attempt. With a retry policy
// the server writes ActivityTaskStarted only once an attempt ends, with the identity of the
// worker that ran it and its attempt number — so this is the attempt that ended the work.
func lastRunWork(ctx context.Context, t *testing.T, tc client.Client, workflowID string) runWork {
	t.Helper()
	scheduled := map[int64]string{}
	var last runWork
	iter := tc.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for iter.HasNext() {
		e, err := iter.Next()
		require.NoError(t, err)
		switch e.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[e.GetEventId()] = e.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName()
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			attrs := e.GetActivityTaskStartedEventAttributes()
			if scheduled[attrs.GetScheduledEventId()] == "RunWork" {
				last = runWork{identity: attrs.GetIdentity(), attempt: attrs.GetAttempt()}
			}
		}
	}
	require.NotEmpty(t, last.identity, "workflow %s: no RunWork attempt in its history", workflowID)
	return last
}

// whose names the process an identity belongs to.
func whose(t *testing.T, identity string, procs ...*workerProcess) string {
	t.Helper()
	for _, p := range procs {
		if strings.HasPrefix(identity, p.identityPrefix()) {
			return p.name
		}
	}
	t.Fatalf("identity %q is none of the test's workers", identity)
	return ""
}

// heldOn answers, for each of the jobs whose work p runs now, the attempt it runs: the job's
// pending RunWork is started and was last taken by p. Running attempts are not in the history
// yet; DescribeWorkflowExecution's pending activities name the worker that holds each. Only jobs
// whose work succeeds count: a failing attempt ends at once, and its retry may run anywhere.
func heldOn(ctx context.Context, tc client.Client, jobs []multiJob, p *workerProcess) (map[string]int32, error) {
	held := map[string]int32{}
	for _, j := range jobs {
		if j.want != ledgerdb.StateDelivered {
			continue
		}
		d, err := tc.DescribeWorkflow(ctx, j.workflowID(), "")
		if err != nil {
			return nil, fmt.Errorf("describing %s: %w", j.workflowID(), err)
		}
		for _, pa := range d.RawResponse.GetPendingActivities() {
			if pa.GetActivityType().GetName() == "RunWork" && pa.GetState() == enumspb.PENDING_ACTIVITY_STATE_STARTED &&
				strings.HasPrefix(pa.GetLastWorkerIdentity(), p.identityPrefix()) {
				held[j.id] = pa.GetAttempt()
			}
		}
	}
	return held, nil
}

// await polls until done answers true, and fails the test when eventLimit passes first, saying
// what it waited for and what done last said stood in the way (an error of Temporal's included:
// the server may be coming back from a restart).
func await(ctx context.Context, t *testing.T, what string, done func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(eventLimit)
	for {
		ok, state := done()
		if ok {
			return
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			t.Fatalf("waited %s for %s; %s", eventLimit, what, state)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// killHolding waits until p holds an attempt of one of the held jobs, SIGKILLs it, and answers
// every job whose attempt it held when it died: the ones seen before the kill, and the ones a
// look right after it finds still on p (it may have taken more in between). The jobs are held,
// so no attempt can end on p between the look and the kill.
func killHolding(ctx context.Context, t *testing.T, tc client.Client, held []multiJob, p *workerProcess) []string {
	t.Helper()
	var onP map[string]int32
	await(ctx, t, p.name+" to hold an attempt", func() (bool, string) {
		var err error
		onP, err = heldOn(ctx, tc, held, p)
		return len(onP) > 0, fmt.Sprintf("it holds none (%v)", err)
	})
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGKILL))
	<-p.done
	require.ErrorContains(t, p.err, "killed")
	after, err := heldOn(ctx, tc, held, p)
	require.NoError(t, err)
	for id, attempt := range after {
		onP[id] = attempt
	}
	ids := make([]string, 0, len(onP))
	for id := range onP {
		ids = append(ids, id)
	}
	return ids
}

// awaitRetriedOn waits until each of the jobs' work runs again on p: its pending RunWork is
// started there, on attempt 2 or later — the dead worker's attempt timed out by its heartbeat and
// was retried.
func awaitRetriedOn(ctx context.Context, t *testing.T, tc client.Client, account string, ids []string, p *workerProcess) {
	t.Helper()
	jobs := make([]multiJob, len(ids))
	for i, id := range ids {
		jobs[i] = multiJob{account: account, id: id, want: ledgerdb.StateDelivered}
	}
	await(ctx, t, "the killed attempts to be retried on "+p.name, func() (bool, string) {
		on, err := heldOn(ctx, tc, jobs, p)
		if err != nil {
			return false, err.Error()
		}
		var missing []string
		for _, id := range ids {
			if on[id] < 2 {
				missing = append(missing, id)
			}
		}
		return len(missing) == 0, fmt.Sprintf("not yet retried there: %v", missing)
	})
}

// release releases every one of the jobs (runner.simulated.release_dir): their attempts finish.
func release(t *testing.T, dir string, jobs []multiJob) {
	t.Helper()
	for _, j := range jobs {
		require.NoError(t, os.WriteFile(filepath.Join(dir, j.id), nil, 0o644))
	}
}

// requireLedger checks every job's rows — a delivered job one charge of its cost, a refunded one
// a charge and its refund, nothing else (the reversing-pairs and net-effect rules) — the balance,
// and the audit.
func requireLedger(ctx context.Context, t *testing.T, store *ledgerdb.Store, account string, granted int64, submitted []multiJob) {
	t.Helper()
	rows := map[string][]ledgerdb.Entry{}
	page := ledgerdb.HistoryPage{Limit: 1000}
	for {
		h, err := store.History(ctx, account, page)
		require.NoError(t, err)
		for _, e := range h.Entries {
			rows[e.JobID] = append(rows[e.JobID], e)
		}
		if h.NextAfterID == 0 {
			break
		}
		page.AfterID = h.NextAfterID
	}
	want := granted
	for _, j := range submitted {
		var got []string
		for _, e := range rows[j.id] {
			got = append(got, fmt.Sprintf("%s %d", e.Kind, e.Amount))
		}
		expect := []string{fmt.Sprintf("charge %d", -j.cost)}
		if j.want == ledgerdb.StateRefunded {
			expect = append(expect, fmt.Sprintf("refund %d", j.cost))
		} else {
			want -= j.cost
		}
		require.Equal(t, expect, got, "job %s (%s): its ledger rows", j.id, j.want)
	}
	require.Len(t, rows, len(submitted)+1, "rows of jobs the test did not submit, besides the grant")
	ledgertest.RequireBalance(t, store, account, want)
}
