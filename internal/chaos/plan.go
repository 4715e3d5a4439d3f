package chaos

// The plan: every choice of the run drawn from the seed — each job's account, price, scenario and
// follow-ups, and the timeline of run-wide injections.

import (
	"fmt"
	mrand "math/rand/v2"
	"sort"
	"time"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
)

// jobPlan is what the seed decided for one job.
type jobPlan struct {
	job            jobs.Job
	duplicate      bool
	deleteAfter    bool
	resubmitLive   bool
	terminate      bool
	reset          bool
	followUpDelay  time.Duration
	submitAtOffset time.Duration
}

// timedInjection is a run-wide injection at an offset from the start of submissions.
type timedInjection struct {
	at      time.Duration
	kind    string
	worker  int        // for kills
	orphan  int        // for orphans
	results []jobs.Job // for the dev server's restart: the jobs whose results may be reported while it is down
}

// Scenario mix, in percent of the jobs on rich accounts; the rest of the 100 is "sim:ok".
var scenarioMix = []struct {
	ref     string
	percent int
}{
	{"sim:ok-on-attempt:2", 10},
	{"sim:ok-on-attempt:3", 5},
	{"sim:fail", 10},
	{"sim:hang", 7},
	{"sim:late:1", 6},
	{"sim:late:3", 10},
}

// The accounts: several rich ones, and one poor one whose jobs are mostly refused.
const (
	richAccounts = 4
	maxCost      = 50
	poorPercent  = 5
)

// The run's price list: "chaos-<cost>" sold by the job at 1 to maxCost credits, and
// "chaos-gpu" metered by the GPU-second, whose jobs report usages within, at and above the hold.
const (
	meteredKind     = "chaos-gpu"
	meteredPrice    = 2
	meteredMax      = 20
	meteredPercent  = 30
	maxMeteredUsage = 30
)

// submissionPhase is how long the run's submissions are planned to take.
func submissionPhase(cfg Config) time.Duration {
	return time.Duration(float64(cfg.Jobs) / cfg.Rate * float64(time.Second))
}

// fixedKind is the run's kind sold by the job at cost credits.
func fixedKind(cost int64) string { return fmt.Sprintf("chaos-%d", cost) }

// plan draws every choice of the run from the seed: each job's account, cost, scenario and
// follow-ups, and the timeline of run-wide injections.
func (r *run) plan(report *Report) ([]jobPlan, []timedInjection) {
	cfg := r.cfg
	rng := mrand.New(mrand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15))
	for i := range richAccounts {
		r.accounts = append(r.accounts, fmt.Sprintf("%sacct-%d", r.prefix, i))
	}
	r.accounts = append(r.accounts, r.prefix+"acct-poor")

	phase := submissionPhase(cfg)
	plans := make([]jobPlan, cfg.Jobs)
	for i := range plans {
		p := &plans[i]
		p.submitAtOffset = time.Duration(float64(i) / cfg.Rate * float64(time.Second))
		p.job = jobs.Job{ID: fmt.Sprintf("%sj%05d", r.prefix, i), Kind: fixedKind(1 + rng.Int64N(maxCost)), InputRef: "sim:ok"}
		var usage string
		if rng.IntN(100) < meteredPercent {
			p.job.Kind = meteredKind
			usage = fmt.Sprintf("+used:%d", rng.Int64N(maxMeteredUsage+1))
		}
		if rng.IntN(100) < poorPercent {
			p.job.AccountID = r.accounts[richAccounts]
		} else {
			p.job.AccountID = r.accounts[rng.IntN(richAccounts)]
		}
		roll := rng.IntN(100)
		for _, s := range scenarioMix {
			if roll < s.percent {
				p.job.InputRef = s.ref + usage
				break
			}
			roll -= s.percent
		}
		switch roll := rng.IntN(100); {
		case roll < 8:
			p.duplicate = true
		case roll < 13:
			p.deleteAfter = true
		case roll < 18:
			p.resubmitLive = true
		case roll < 22:
			p.terminate = true
		case roll < 26:
			p.reset = true
		}
		p.followUpDelay = time.Duration(rng.Int64N(int64(4 * time.Second)))
		sc, _ := activities.ParseScenario(p.job.InputRef)
		sc.Used = nil
		report.Scenarios[sc.String()]++
		if p.job.Kind == meteredKind {
			report.Metered++
		}
	}
	// Every follow-up kind at least once, even in a tiny run. An operator's terminate or reset
	// goes to a job that is sure to be still running when it comes (a hanging or late one on a
	// rich account), so that it is a real one.
	if cfg.Jobs >= 5 {
		forced := map[int]bool{}
		for k, set := range []func(*jobPlan){
			func(p *jobPlan) { p.duplicate = true }, func(p *jobPlan) { p.deleteAfter = true }, func(p *jobPlan) { p.resubmitLive = true },
			func(p *jobPlan) { p.terminate = true }, func(p *jobPlan) { p.reset = true },
		} {
			i := (k + 1) * cfg.Jobs / 6
			if k >= 3 {
				i = r.longRunning(plans, i, forced)
			}
			forced[i] = true
			plans[i].clearFollowUps()
			set(&plans[i])
		}
	}

	timeline := r.planTimeline(plans, rng, phase)
	r.logPlan(report, plans, timeline)
	return plans, timeline
}

// planTimeline draws the run-wide injections over the submission phase: the worker kills, the
// restarts, the orphans, and last the jobs whose results may be reported while the dev server is
// down.
func (r *run) planTimeline(plans []jobPlan, rng *mrand.Rand, phase time.Duration) []timedInjection {
	cfg := r.cfg
	var timeline []timedInjection
	for at := time.Duration(0); ; {
		at += time.Duration(float64(cfg.KillEvery) * (0.5 + rng.Float64()))
		if at >= phase && len(timeline) > 0 {
			break
		}
		timeline = append(timeline, timedInjection{at: min(at, phase), kind: KindKillWorker, worker: rng.IntN(2)})
	}
	if cfg.RestartTemporal {
		timeline = append(timeline, timedInjection{at: time.Duration(float64(phase) * (0.3 + 0.3*rng.Float64())), kind: KindRestartTemporal})
	}
	if cfg.RestartPostgres {
		timeline = append(timeline, timedInjection{at: time.Duration(float64(phase) * (0.5 + 0.3*rng.Float64())), kind: KindRestartPostgres})
	}
	for i := range cfg.Orphans {
		timeline = append(timeline, timedInjection{at: time.Duration(float64(phase) * rng.Float64()), kind: KindOrphan, orphan: i})
	}
	// Drawn last, so that they change none of the choices above.
	for i := range timeline {
		if timeline[i].kind == KindRestartTemporal {
			timeline[i].results = r.outageJobs(plans, rng)
		}
	}
	sort.SliceStable(timeline, func(a, b int) bool { return timeline[a].at < timeline[b].at })
	return timeline
}

// logPlan prints the plan: the scenarios, the follow-ups and the timeline.
func (r *run) logPlan(report *Report, plans []jobPlan, timeline []timedInjection) {
	var dup, del, live, term, reset int
	for _, p := range plans {
		dup, del, live = dup+b2i(p.duplicate), del+b2i(p.deleteAfter), live+b2i(p.resubmitLive)
		term, reset = term+b2i(p.terminate), reset+b2i(p.reset)
	}
	fmt.Fprintf(r.out, "plan: scenarios %v (%d metered by the GPU-second); duplicate results for %d jobs, delete+resubmit %d, live resubmits %d, terminates %d, resets %d\n",
		report.Scenarios, report.Metered, dup, del, live, term, reset)
	for _, t := range timeline {
		var results string
		if len(t.results) > 0 {
			results = fmt.Sprintf("; results of up to %d of %d candidate jobs reported while it is down", r.cfg.OutageResults, len(t.results))
		}
		fmt.Fprintf(r.out, "plan: at +%.3fs %s%s\n", t.at.Seconds(), t.kind, results)
	}
}

// outageJobs draws the order in which jobs are picked for a result reported while the dev server
// is down: jobs a rich account pays for, with no other follow-up, whose work fails, hangs or is
// late, so that the result decides what the job costs — but not late on attempt 1, whose result
// the simulated runner reports itself, with another output. While the server is down, the first
// OutageResults of them whose submission has answered (their charge is decided: a result needs
// it) get one; which have answered by then depends on how fast the machine is.
func (r *run) outageJobs(plans []jobPlan, rng *mrand.Rand) []jobs.Job {
	var candidates []jobs.Job
	for _, p := range plans {
		sc, _ := activities.ParseScenario(p.job.InputRef)
		matters := sc.Kind == activities.ScenarioHang || sc.Kind == activities.ScenarioFail ||
			(sc.Kind == activities.ScenarioLate && sc.Attempt > 1)
		if matters && !p.hasFollowUp() && p.job.AccountID != r.accounts[richAccounts] {
			candidates = append(candidates, p.job)
		}
	}
	rng.Shuffle(len(candidates), func(a, b int) { candidates[a], candidates[b] = candidates[b], candidates[a] })
	return candidates
}

// hasFollowUp reports whether the plan has any follow-up.
func (p jobPlan) hasFollowUp() bool {
	return p.duplicate || p.deleteAfter || p.resubmitLive || p.terminate || p.reset
}

// clearFollowUps takes every follow-up off the plan.
func (p *jobPlan) clearFollowUps() {
	p.duplicate, p.deleteAfter, p.resubmitLive, p.terminate, p.reset = false, false, false, false, false
}

// longRunning is the first job from index from on (wrapping around) that a rich account pays for
// and whose work runs for seconds — hanging, or late on its last attempt — and that is not in
// taken; from itself when there is none.
func (r *run) longRunning(plans []jobPlan, from int, taken map[int]bool) int {
	for k := range plans {
		i := (from + k) % len(plans)
		sc, _ := activities.ParseScenario(plans[i].job.InputRef)
		long := sc.Kind == activities.ScenarioHang || (sc.Kind == activities.ScenarioLate && sc.Attempt == 3)
		if !taken[i] && plans[i].job.AccountID != r.accounts[richAccounts] && long {
			return i
		}
	}
	return from
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
