// Package stories plays the stories jobbill exists for against a running worker, on a fresh
// account: a job delivered on the first try; one whose every attempt times out, is refunded, and
// whose result then lands late (recovered); one that fails for good (refunded, dead-lettered);
// the same result reported twice (delivered once); one refused for insufficient credits
// (rejected, nothing charged); and two metered by the GPU-second — one that holds 300 credits
// and uses 137 seconds (charged 137, 163 returned), one refunded after its attempts timed out
// whose result lands late with 90 seconds used (reclaimed, settled at 90); and, after them, one
// that draws on a promotional block which expires while the job waits for its late result (the
// reclaim draws again, from the paid credits). Beside them, on an account of its own, an automatic
// top-up as a customer's product lives it: a charge takes the balance below its rule's threshold,
// the signed topup.requested webhook reaches the product's receiver, and its payment code buys the
// credits through the HTTP API under the event's idempotency key — once, though the event is
// delivered twice. It prints each job's end, its money, the sentence its user reads, its page in
// the Temporal UI and its ledger rows, then the balances and the audit. `make run` plays them
// (cmd/jobbill-dev run).
package stories

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
	"github.com/jobbill/jobbill/workflows"
)

// Configure makes the stories take seconds rather than the GPU defaults' minutes: 3 attempts,
// 1 s then 2 s apart, and 2 minutes to wait for a late result. An attempt may run a minute and
// go 30 s without a heartbeat, far beyond the simulated work of a second, so that a story whose
// work finishes ends as it says however loaded the machine; the stories whose attempts must time
// out run under [TimeoutPolicy]. The worker that plays them must run with it.
func Configure(c *config.Config) {
	c.Policy.InitialInterval = time.Second
	c.Policy.BackoffCoefficient = 2
	c.Policy.MaximumInterval = 5 * time.Second
	c.Policy.MaximumAttempts = 3
	c.Policy.StartToClose = time.Minute
	c.Policy.HeartbeatTimeout = 30 * time.Second
	c.Policy.LateResultWindow = 2 * time.Minute
	c.Runner.Simulated.Duration = time.Second
	c.Runner.Simulated.FailureRate = 0
	// Story (h)'s promotional block lasts seconds; a worker that creates the schedules removes what
	// is left of it soon after.
	c.Expiry.Interval = 2 * time.Second
	// Story (i)'s product receives its webhooks on 127.0.0.1 over plain http, and answers the first
	// delivery of its event with an error: the retry comes a second or less later.
	c.Webhooks.Enabled = true
	c.Webhooks.AllowPrivateURLs = true
	c.Webhooks.InitialBackoff = time.Second
}

// TimeoutPolicy is the policy of the stories whose every attempt times out, (b) and (g): the
// configured one (Configure's), but an attempt may run 3 s. Their work never finishes
// ("sim:hang"), so the timeouts are certain, and short, so the stories stay quick; their result
// lands once the story has seen the refund, as a GPU service's late call would report it.
func TimeoutPolicy(c config.Config) workflows.Policy {
	p := c.Policy
	p.StartToClose = 3 * time.Second
	p.HeartbeatTimeout = 3 * time.Second
	return p
}

// The price list the stories are billed at. Play sets it (a price equal to the latest changes
// nothing), so a fresh database needs no setup.
var prices = []ledgerdb.Price{
	{Kind: "render", Unit: ledgerdb.UnitJob, UnitPrice: 40, MaxUnits: 1, Memo: "a render, sold whole"},
	{Kind: "render-batch", Unit: ledgerdb.UnitJob, UnitPrice: 10_000, MaxUnits: 1, Memo: "a batch of renders, sold whole"},
	{Kind: "gpu-render", Unit: ledgerdb.UnitGPUSecond, UnitPrice: 1, MaxUnits: 300, Memo: "GPU time, by the second, at most 5 minutes"},
}

// grant is the credits the stories' account starts with: enough for every story to run at once
// (four renders and two five-minute holds) but not for a batch.
const grant = 1000

// story is one of the jobs and how its end is reached.
type story struct {
	name, title string
	kind        string
	input       string
	// timesOut says the story runs under [TimeoutPolicy].
	timesOut bool
	// afterTheOthers says the story starts once the others have ended.
	afterTheOthers bool
	// account is the story's own account; the run's when empty.
	account string
	// before runs before its job is submitted, to set the stage.
	before func(ctx context.Context) error
	// then runs after the charge is decided, to report results as the story needs.
	then func(ctx context.Context, st *jobs.Service, job ledgerdb.JobKey) error
	// ends are the states the story waits for.
	ends []ledgerdb.State
	// charged is what the story's job must cost the account at its end (the net-effect rule: −units
	// used × unit price for a metered job).
	charged int64
	// tell says, after the story's rows, what else became of its money, and fails the run if the
	// story broke a rule of its own.
	tell func(ctx context.Context) (string, error)
}

// Services are what the stories are played through.
type Services struct {
	// Ledger is the ledger the worker writes.
	Ledger *ledgerdb.Store
	// Jobs submits jobs to a worker that runs as [Configure] says, with its policy; TimingOut is
	// the same job service with [TimeoutPolicy].
	Jobs, TimingOut *jobs.Service
	// API is the base URL (http://host:port) of the HTTP API over the same ledger and worker,
	// which story (i)'s product calls as a product's code does.
	API string
}

// Run is one playing of the stories: its name, which names its jobs, and its fresh accounts.
type Run struct {
	// Name is the date and time the run began and a random suffix.
	Name string
	// Account is the account the stories are played on, story (i)'s aside.
	Account string
	// TopUpAccount is story (i)'s, whose automatic top-up rule buys it credits.
	TopUpAccount string
}

// NewRun names a new playing of the stories and its account.
func NewRun() Run {
	var suffix [2]byte
	_, _ = rand.Read(suffix[:])
	name := time.Now().UTC().Format("20060102-150405-") + hex.EncodeToString(suffix[:])
	return Run{Name: name, Account: "demo-" + name, TopUpAccount: "topup-" + name}
}

// Play plays the stories through s, on the run's account, and fails when a story ends otherwise
// than it should or the account's audit finds a broken money rule.
func (r Run) Play(ctx context.Context, svc Services, out io.Writer) (err error) {
	ledger, run, account := svc.Ledger, r.Name, r.Account
	for _, p := range prices {
		if _, _, err := ledger.SetPrice(ctx, p); err != nil {
			return err
		}
	}
	if _, err := ledger.OpenAccount(ctx, account); err != nil {
		return err
	}
	if _, err := ledger.Grant(ctx, ledgerdb.Credit{AccountID: account, Amount: grant, Key: "welcome", Memo: "demo credits"}); err != nil {
		return err
	}
	fmt.Fprintf(out, "price list: render 40 credits a job; render-batch 10000 a job; gpu-render 1 credit a GPU-second, at most 300\n")
	fmt.Fprintf(out, "account %s granted %d credits; playing nine stories (about 40 seconds)\n", account, grant)

	reportTwice := func(ctx context.Context, st *jobs.Service, job ledgerdb.JobKey) error {
		// Two reports of the same result race each other, as a duplicated callback would.
		res := activities.WorkResult{Attempt: 1, OutputRef: "sim://" + job.JobID + "/callback", FinishedAt: time.Now().UTC()}
		var wg sync.WaitGroup
		errs := make([]error, 2)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = st.ReportResult(ctx, job, res)
			}()
		}
		wg.Wait()
		return errors.Join(errs...)
	}
	// landsLate reports the result of the last attempt once every attempt has timed out and the
	// job is refunded, with the usage the GPU service measured (nil: none).
	landsLate := func(used *int64) func(context.Context, *jobs.Service, ledgerdb.JobKey) error {
		return func(ctx context.Context, st *jobs.Service, job ledgerdb.JobKey) error {
			waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
			defer cancel()
			if _, err := st.Wait(waitCtx, job, ledgerdb.StateRefunded); err != nil {
				return err
			}
			res := activities.WorkResult{Attempt: 3, OutputRef: fmt.Sprintf("sim://%s/attempt-3", job.JobID), FinishedAt: time.Now().UTC(), UnitsUsed: used}
			_, err := st.ReportResult(ctx, job, res)
			return err
		}
	}
	used90, used60 := int64(90), int64(60)
	// (h) runs after the others, alone, so that the promotional block granted just before it is
	// the one its job draws from.
	promo := &promotionalBlock{ledger: ledger, account: account, run: run}
	// (i) is played on an account of its own, whose balance it follows from start to end.
	top := newTopUp(ledger, r.TopUpAccount, svc.API)
	defer func() { err = errors.Join(err, top.close(ctx)) }()
	stories := []story{
		{name: "a", title: "success on the first try", kind: "render", input: "sim:ok", ends: []ledgerdb.State{ledgerdb.StateDelivered}, charged: 40},
		{name: "b", title: "every attempt times out, refunded, then the result lands late", kind: "render", input: "sim:hang", timesOut: true, then: landsLate(nil), ends: []ledgerdb.State{ledgerdb.StateRecovered}, charged: 40},
		{name: "c", title: "every attempt fails: refunded and dead-lettered for good", kind: "render", input: "sim:fail", ends: []ledgerdb.State{ledgerdb.StateRefunded}},
		{name: "d", title: "the same result signalled twice", kind: "render", input: "sim:hang", then: reportTwice, ends: []ledgerdb.State{ledgerdb.StateDelivered}, charged: 40},
		{name: "e", title: "insufficient credits: rejected, nothing charged", kind: "render-batch", input: "sim:ok", ends: []ledgerdb.State{ledgerdb.StateRejected}},
		{name: "f", title: "metered: 300 credits held, 137 GPU-seconds used", kind: "gpu-render", input: "sim:ok+used:137", ends: []ledgerdb.State{ledgerdb.StateDelivered}, charged: 137},
		{name: "g", title: "metered: every attempt times out, refunded, then the result lands late with 90 GPU-seconds used", kind: "gpu-render", input: "sim:hang", timesOut: true, then: landsLate(&used90), ends: []ledgerdb.State{ledgerdb.StateRecovered}, charged: 90},
		{name: "h", kind: "gpu-render", input: "sim:hang", timesOut: true, afterTheOthers: true,
			title:  "a promotional block expires while a job that drew from it waits for its late result",
			before: promo.grant, then: promo.expiresWhileLate(&used60), ends: []ledgerdb.State{ledgerdb.StateRecovered}, charged: 60, tell: promo.tell},
		{name: "i", kind: "render", input: "sim:ok", account: r.TopUpAccount,
			title:  fmt.Sprintf("an automatic top-up: a render's charge takes its account below %d credits, and the product's payment code buys what fills it up to %d", topUpThreshold, topUpTarget),
			before: top.setUp, then: top.landed, ends: []ledgerdb.State{ledgerdb.StateDelivered}, charged: topUpCharge, tell: top.tell},
	}
	final := make([]jobs.Status, len(stories))
	errs := make([]error, len(stories))
	for _, afterTheOthers := range []bool{false, true} {
		var wg sync.WaitGroup
		for i, s := range stories {
			if s.afterTheOthers != afterTheOthers {
				continue
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				via := svc.Jobs
				if s.timesOut {
					via = svc.TimingOut
				}
				final[i], errs[i] = playStory(ctx, via, account, run, s)
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err
		}
	}

	history, err := ledger.History(ctx, account, ledgerdb.HistoryPage{Limit: 1000})
	if err != nil {
		return err
	}
	for i, s := range stories {
		status := final[i]
		fmt.Fprint(out, storyLines(s.name, s.title, status))
		for _, e := range history.Entries {
			if e.JobID == status.JobID {
				fmt.Fprint(out, rowLine(e))
			}
		}
		if len(s.ends) > 0 && status.State != s.ends[0] {
			return fmt.Errorf("story (%s) ended %s, not %s", s.name, status.State, s.ends[0])
		}
		if status.Charged != s.charged {
			return fmt.Errorf("story (%s) cost %d credits, not %d", s.name, status.Charged, s.charged)
		}
		if s.tell != nil {
			told, err := s.tell(ctx)
			if err != nil {
				return err
			}
			fmt.Fprint(out, told)
		}
	}
	fmt.Fprintln(out)
	for _, acct := range []string{account, r.TopUpAccount} {
		report, err := ledger.Audit(ctx, acct)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "balance of %s: %d credits = the sum of its %d ledger rows (%d)\n", acct, report.Balance, report.Entries, report.EntrySum)
		if !report.OK() {
			return fmt.Errorf("audit of %s found violations: %v", acct, report.Violations)
		}
	}
	fmt.Fprintln(out, "audit: every money rule holds")
	return nil
}

// rowLine is a ledger row as the stories print it.
// storyLines are what a story's end prints before its rows: its name and title, the job's state,
// money state and attempts, its sentence and its workflow's link.
func storyLines(name, title string, status jobs.Status) string {
	return fmt.Sprintf("\n(%s) %s\n    job %s: %s, money %s, %s\n    %s\n    %s\n",
		name, title, status.JobID, status.State, status.MoneyState, plural.Count(status.Attempts, "attempt"), status.Message, status.WorkflowURL)
}

func rowLine(e ledgerdb.Entry) string {
	return fmt.Sprintf("      row %-6d %-8s %+6d  balance after %d\n", e.ID, e.Kind, e.Amount, e.BalanceAfter)
}

func playStory(ctx context.Context, st *jobs.Service, account, run string, s story) (jobs.Status, error) {
	if s.before != nil {
		if err := s.before(ctx); err != nil {
			return jobs.Status{}, fmt.Errorf("story (%s): %w", s.name, err)
		}
	}
	if s.account != "" {
		account = s.account
	}
	job := jobs.Job{ID: fmt.Sprintf("%s-%s", s.name, run), AccountID: account, Kind: s.kind, InputRef: s.input}
	_, err := st.Submit(ctx, job)
	if err != nil && !errors.Is(err, ledgerdb.ErrInsufficientCredits) {
		return jobs.Status{}, fmt.Errorf("story (%s): %w", s.name, err)
	}
	if s.then != nil {
		if err := s.then(ctx, st, job.Key()); err != nil {
			return jobs.Status{}, fmt.Errorf("story (%s): %w", s.name, err)
		}
	}
	waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	status, err := st.Wait(waitCtx, job.Key(), s.ends...)
	if err != nil {
		return status, fmt.Errorf("story (%s): %w", s.name, err)
	}
	return status, nil
}

// promotionalBlockLife is how long story (h)'s promotional block lasts: about as long as its
// job's attempts take to time out, so that it expires while the job waits for its late result —
// or, on a slow machine, before the refund, whose credits then expire at once. Either way the
// late result's reclaim draws again from the paid credits.
const promotionalBlockLife = 10 * time.Second

// promotionalBlock is story (h)'s block on the account of the run: granted just before its job,
// expiring while the job waits for its late result.
type promotionalBlock struct {
	ledger       *ledgerdb.Store
	account, run string
	id           int64
	expiresAt    time.Time
}

// grant gives the account 300 promotional credits that expire in promotionalBlockLife.
func (b *promotionalBlock) grant(ctx context.Context) error {
	ledger, account, run := b.ledger, b.account, b.run
	b.expiresAt = time.Now().Add(promotionalBlockLife)
	p, err := ledger.Grant(ctx, ledgerdb.Credit{AccountID: account, Amount: 300, Key: "welcome-promo-" + run, Memo: "a welcome gift, spent first",
		Block: ledgerdb.BlockTerms{Category: ledgerdb.CategoryPromotional, ExpiresAt: &b.expiresAt}})
	if err != nil {
		return fmt.Errorf("granting its promotional block: %w", err)
	}
	blocks, err := ledger.Blocks(ctx, account)
	if err != nil {
		return err
	}
	for _, blk := range blocks {
		if blk.Key == "welcome-promo-"+run {
			b.id = blk.ID
		}
	}
	if b.id == 0 {
		return fmt.Errorf("grant row %d made no block", p.EntryID)
	}
	return nil
}

// expiresWhileLate waits for the job's refund, then for its block's expiry to pass, and reports
// the last attempt's result with the usage given: the reclaim draws again, in today's order of
// spending, from the paid credits.
func (b *promotionalBlock) expiresWhileLate(used *int64) func(context.Context, *jobs.Service, ledgerdb.JobKey) error {
	return func(ctx context.Context, st *jobs.Service, job ledgerdb.JobKey) error {
		waitCtx, cancel := context.WithTimeout(ctx, 90*time.Second)
		defer cancel()
		if _, err := st.Wait(waitCtx, job, ledgerdb.StateRefunded); err != nil {
			return err
		}
		select {
		case <-time.After(time.Until(b.expiresAt)):
		case <-ctx.Done():
			return ctx.Err()
		}
		res := activities.WorkResult{Attempt: 3, OutputRef: fmt.Sprintf("sim://%s/attempt-3", job.JobID), FinishedAt: time.Now().UTC(), UnitsUsed: used}
		_, err := st.ReportResult(ctx, job, res)
		return err
	}
}

// tell says what became of the promotional block, and fails if the late result drew on it after
// it expired.
func (b *promotionalBlock) tell(ctx context.Context) (string, error) {
	blocks, err := b.ledger.Blocks(ctx, b.account)
	if err != nil {
		return "", err
	}
	for _, blk := range blocks {
		if blk.ID != b.id {
			continue
		}
		if blk.Spendable(time.Now()) {
			return "", fmt.Errorf("story (h): promotional block %d can still be spent after its expiry", blk.ID)
		}
		// The audit, next, fails the run if the late result drew on the block after its expiry.
		removed := "the expiry pass has not removed them yet"
		switch {
		case blk.ExpiredAt != nil:
			removed = "what was left removed by the expiry pass"
		case blk.Remaining == 0:
			removed = "the refund's credits came back after it and expired at once"
		}
		return fmt.Sprintf("    promotional block %d: 300 credits granted, expired %s; %d left in it, %s; the late result drew from the paid credits\n",
			blk.ID, blk.ExpiresAt.UTC().Format("15:04:05 UTC"), blk.Remaining, removed), nil
	}
	return "", fmt.Errorf("story (h): promotional block %d not found", b.id)
}
