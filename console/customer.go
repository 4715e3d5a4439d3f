package console

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
	"github.com/jobbill/jobbill/workflows"
)

// accountPath is an account's page.
func accountPath(accountID string) string { return "/console/accounts/" + url.PathEscape(accountID) }

// jobPath is a job's page.
func jobPath(accountID, jobID string) string {
	return accountPath(accountID) + "/jobs/" + url.PathEscape(jobID)
}

// readableAccount is the account a page names, when the viewer may read it; errNotFound
// otherwise — exactly the answer for an account that does not exist, so a session learns nothing
// of other tenants.
func readableAccount(r *http.Request, v *viewer) (string, error) {
	id := r.PathValue("account")
	if ledgerdb.ValidateID("account ID", id) != nil || !v.may(id) {
		return "", errNotFound
	}
	return id, nil
}

// readableJob is the job a page names, when the viewer may read its account; errNotFound
// otherwise, as readableAccount answers.
func readableJob(r *http.Request, v *viewer) (ledgerdb.JobKey, error) {
	id, err := readableAccount(r, v)
	if err != nil {
		return ledgerdb.JobKey{}, err
	}
	key := ledgerdb.JobKey{AccountID: id, JobID: r.PathValue("job")}
	if ledgerdb.ValidateID("job ID", key.JobID) != nil {
		return ledgerdb.JobKey{}, errNotFound
	}
	return key, nil
}

// chartDays is the period the account page draws and its statement form starts with.
const chartDays = 30

// accountData is the account page's.
type accountData struct {
	AccountID string
	Balance   int64
	// Chart is the balance over the period, drawn as SVG.
	Chart chart
	// Rows are the period's last ledger rows, newest first.
	Rows []ledgerdb.Entry
	// Blocks are the account's credit blocks in the order of spending.
	Blocks []blockView
	// From and To are the statement form's default period (dates, To exclusive).
	From, To string
	// JobsPath and StatementPath are the account's pages.
	JobsPath, StatementPath string
}

// blockView is one credit block as the account page shows it.
type blockView struct {
	ledgerdb.Block
	// State says in words whether its credits can be spent now.
	State string
	// Expires says when it expires, or "never".
	Expires string
}

// blockViews says, for each block, where it stands at now.
func blockViews(blocks []ledgerdb.Block, now time.Time) []blockView {
	out := make([]blockView, 0, len(blocks))
	for _, b := range blocks {
		state := "spendable"
		switch {
		case b.Status == ledgerdb.BlockPending:
			state = "waiting for its payment"
		case b.Status == ledgerdb.BlockVoid:
			state = "void: its payment failed"
		case b.ExpiredAt != nil || (b.ExpiresAt != nil && !b.ExpiresAt.After(now)):
			state = "expired"
		case b.EffectiveAt.After(now):
			state = "starts " + b.EffectiveAt.UTC().Format("2 Jan 2006 15:04 UTC")
		case b.Remaining == 0:
			state = "used up"
		}
		expires := "never"
		if b.ExpiresAt != nil {
			expires = b.ExpiresAt.UTC().Format("2006-01-02 15:04:05 UTC")
		}
		out = append(out, blockView{Block: b, State: state, Expires: expires})
	}
	return out
}

// JobPath links a row to its job.
func (accountData) JobPath(accountID, jobID string) string { return jobPath(accountID, jobID) }

// account is an account's page: its balance now and over the last days, its credit blocks, and
// its last rows.
func (c *Console) account(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id, err := readableAccount(r, v)
	if err != nil {
		return err
	}
	balance, err := c.opts.Ledger.Balance(r.Context(), id)
	if err != nil {
		return err
	}
	now := time.Now().UTC()
	since := now.AddDate(0, 0, -chartDays)
	entries, err := c.opts.Ledger.RecentEntries(r.Context(), id, since, ledgerdb.MaxRecentEntries)
	if err != nil {
		return err
	}
	rows := make([]ledgerdb.Entry, 0, 20)
	for i := len(entries) - 1; i >= 0 && len(rows) < 20; i-- {
		rows = append(rows, entries[i])
	}
	blocks, err := c.opts.Ledger.Blocks(r.Context(), id)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "account", v, "Account "+id, accountData{
		AccountID:     id,
		Balance:       balance,
		Chart:         drawBalance(entries, since, now, balance, len(entries) < ledgerdb.MaxRecentEntries),
		Rows:          rows,
		Blocks:        blockViews(blocks, now),
		From:          since.Format(time.DateOnly),
		To:            now.AddDate(0, 0, 1).Format(time.DateOnly),
		JobsPath:      accountPath(id) + "/jobs",
		StatementPath: accountPath(id) + "/statement.csv",
	})
	return nil
}

// jobListData is the jobs page's.
type jobListData struct {
	AccountID string
	Jobs      []jobs.Status
	// Query is the filter as sent, to fill the form again.
	Query url.Values
	// States are every state, for the filter's choices.
	States []ledgerdb.State
	// Next is the next page's link; "" on the last page.
	Next string
}

// JobPath links a listed job to its page.
func (jobListData) JobPath(accountID, jobID string) string { return jobPath(accountID, jobID) }

// Selected reports whether the filter chose the state.
func (d jobListData) Selected(state ledgerdb.State) bool {
	for _, s := range d.Query["state"] {
		if s == string(state) {
			return true
		}
	}
	return false
}

// jobList is an account's jobs, newest first, with the filters of GET /v1/jobs, read by the same
// code (api.ParseJobFilter, jobs.Service.List). Empty fields of the filter form mean "any".
func (c *Console) jobList(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id, err := readableAccount(r, v)
	if err != nil {
		return err
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return badInput("The filter cannot be read.")
	}
	for name, values := range q {
		kept := values[:0]
		for _, value := range values {
			if value != "" {
				kept = append(kept, value)
			}
		}
		if len(kept) == 0 {
			delete(q, name)
		} else {
			q[name] = kept
		}
	}
	f, err := readJobFilter(q)
	if err != nil {
		return err
	}
	f.AccountID = id
	if _, err := c.opts.Ledger.Balance(r.Context(), id); err != nil {
		return err
	}
	list, err := c.opts.Jobs.List(r.Context(), f)
	if err != nil {
		return err
	}
	data := jobListData{AccountID: id, Jobs: list.Jobs, Query: q, States: ledgerdb.States}
	if list.Next != nil {
		next := url.Values{}
		for k, vs := range q {
			next[k] = vs
		}
		next.Set("cursor", list.Next.String())
		data.Next = accountPath(id) + "/jobs?" + next.Encode()
	}
	c.render(w, r, http.StatusOK, "jobs", v, "Jobs of "+id, data)
	return nil
}

// jobFilter is one of the jobs page's filters: GET /v1/jobs's, but for account_id, since the page
// is one account's.
type jobFilter struct {
	// name is the query parameter, and label how the form names it; "" for the cursor, which
	// the next page's link sets.
	name, label string
	// problem says, in the page's words — the form's labels, not the API's parameters — what is
	// wrong with a value of it the API's parser refuses.
	problem func(value string) string
}

// jobFilters are the jobs page's filters, in the order of its form.
var jobFilters = []jobFilter{
	{"state", "State", func(v string) string {
		return fmt.Sprintf("State %q is not a state of a job; the states are %s.", clip(v), stateNames())
	}},
	{"dead_lettered", "Dead lettered", func(string) string { return "Dead lettered must be yes (true) or no (false)." }},
	{"created_after", "Created after", func(v string) string {
		return fmt.Sprintf("Created after %q is not a time like 2026-01-02T15:04:05Z.", clip(v))
	}},
	{"created_before", "Created before", func(v string) string {
		return fmt.Sprintf("Created before %q is not a time like 2026-01-02T15:04:05Z.", clip(v))
	}},
	{"limit", "Per page", func(string) string {
		return fmt.Sprintf("Per page must be a whole number from 1 to %d.", ledgerdb.MaxJobPage)
	}},
	{"cursor", "", func(string) string {
		return "The next page's link is damaged or out of date: open the jobs page again from its first page."
	}},
}

// jobFilterNames names the filters a person can set, as the form labels them.
const jobFilterNames = "state, dead lettered, created after, created before and per page"

// stateNames lists every state of a job.
func stateNames() string {
	names := make([]string, len(ledgerdb.States))
	for i, st := range ledgerdb.States {
		names[i] = string(st)
	}
	return strings.Join(names, ", ")
}

// readJobFilter reads the jobs page's filter, by the API's rules (api.ParseJobFilter, the one
// home of what GET /v1/jobs takes) but refusing in the page's own words: each filter is checked
// alone first, so the refusal names the one that is wrong as the form labels it, and never names
// a parameter of the API's the page does not take.
func readJobFilter(q url.Values) (ledgerdb.JobFilter, error) {
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		if !slices.ContainsFunc(jobFilters, func(f jobFilter) bool { return f.name == name }) {
			return ledgerdb.JobFilter{}, badInput("The jobs page has no filter %q; its filters are %s.", clip(name), jobFilterNames)
		}
	}
	for _, f := range jobFilters {
		values := q[f.name]
		if len(values) > 1 && f.name != "state" {
			if f.label == "" {
				return ledgerdb.JobFilter{}, badInput("%s", f.problem(values[1]))
			}
			return ledgerdb.JobFilter{}, badInput("%s is given %d times; give it once.", f.label, len(values))
		}
		for _, value := range values {
			parts := []string{value}
			if f.name == "state" {
				parts = strings.Split(value, ",")
			}
			for _, part := range parts {
				if _, err := api.ParseJobFilter(url.Values{f.name: {part}}.Encode()); err != nil {
					return ledgerdb.JobFilter{}, badInput("%s", f.problem(part))
				}
			}
		}
	}
	filter, err := api.ParseJobFilter(q.Encode())
	switch {
	case err == nil:
		return filter, nil
	case q.Has("created_after") && q.Has("created_before"):
		// Each filter passed alone: what is left is how the two times go together.
		return ledgerdb.JobFilter{}, badInput("Created after must be before created before: the range holds no time.")
	}
	return ledgerdb.JobFilter{}, badInput("The filter cannot be read.")
}

// jobRow is one of a job's ledger rows and what it did, in words.
type jobRow struct {
	Entry ledgerdb.Entry
	Text  string
}

// jobData is the job page's.
type jobData struct {
	Status jobs.Status
	Rows   []jobRow
	// Deliveries are the job's webhook events at its account's endpoints.
	Deliveries []webhooks.JobDelivery
	// Operator's detail: shown to admin sessions only.
	Operator *operatorJob
}

// operatorJob is what an operator sees of a job beyond its customer.
type operatorJob struct {
	// Detail is the refund's or rejection's words from outside, scrubbed of credentials.
	Detail string
	// WorkflowURL is the job's timeline in the Temporal UI; "" without a configured UI.
	WorkflowURL string
	// WorkflowID is the job's workflow's ID.
	WorkflowID string
	// Heal says whether the job is left to heal, in words.
	Heal string
	// Results are the results recorded for it.
	Results []ledgerdb.RecordedResultRow
	// Redrivable says whether the redrive form applies (a refunded job).
	Redrivable bool
	// RedrivePath is the redrive form's target.
	RedrivePath string
}

// job is a job's page: the sentence the API gives, the price it was submitted at, and each of its
// ledger rows in words ([jobs.RowText]); an operator also sees its detail.
func (c *Console) job(w http.ResponseWriter, r *http.Request, v *viewer) error {
	key, err := readableJob(r, v)
	if err != nil {
		return err
	}
	id := key.AccountID
	st, err := c.opts.Jobs.Status(r.Context(), key)
	if err != nil {
		return err
	}
	job, err := c.opts.Ledger.Job(r.Context(), key)
	if err != nil {
		return err
	}
	entries, err := c.opts.Ledger.JobEntries(r.Context(), key)
	if err != nil {
		return err
	}
	deliveries, err := c.hooks.JobDeliveries(r.Context(), key)
	if err != nil {
		return err
	}
	data := jobData{Status: st, Deliveries: deliveries}
	for _, e := range entries {
		data.Rows = append(data.Rows, jobRow{Entry: e, Text: jobs.RowText(job, e)})
	}
	if v.admin() {
		results, err := c.opts.Ledger.JobResults(r.Context(), key)
		if err != nil {
			return err
		}
		data.Operator = &operatorJob{Detail: st.Detail, WorkflowURL: st.WorkflowURL,
			WorkflowID: workflows.JobWorkflowID(id, key.JobID), Heal: healState(job), Results: results,
			Redrivable: job.State == ledgerdb.StateRefunded, RedrivePath: jobPath(id, key.JobID) + "/redrive"}
	}
	c.render(w, r, http.StatusOK, "job", v, "Job "+key.JobID, data)
	return nil
}

// healState says where a job stands with respect to healing, for an operator.
func healState(job ledgerdb.Job) string {
	switch {
	case job.State == ledgerdb.StateSubmitting:
		return "Submitting: its charge is being decided; a placeholder left undecided is resumed or rejected by the reconcile pass."
	case job.State == ledgerdb.StateRunning:
		return "Running: every read and the reconcile pass check that its workflow is open, and refund it if the workflow closed without settling it."
	case job.RefundReason == ledgerdb.ReasonInterrupted || job.RefundReason == ledgerdb.ReasonStoppedByOperator:
		return "Healed: its workflow closed without settling it, and it was refunded (" + string(job.RefundReason) + ")."
	case job.State == ledgerdb.StateRefunded:
		return "Refunded by its workflow; it waits for a late result or a redrive."
	}
	return "Settled: nothing left to heal."
}

// statement downloads an account's statement for a period as CSV: the opening balance, the
// period's rows summed by kind, and the closing balance ([ledgerdb.Store.Statement]), so that
// opening plus the lines is the closing. from and to are dates (UTC), to exclusive.
func (c *Console) statement(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id, err := readableAccount(r, v)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	from, err := dateParam(q, "from")
	if err != nil {
		return err
	}
	to, err := dateParam(q, "to")
	if err != nil {
		return err
	}
	if !from.Before(to) {
		return badInput("The statement's period runs from %s to %s: its start must be before its end.", q.Get("from"), q.Get("to"))
	}
	st, err := c.opts.Ledger.Statement(r.Context(), id, from, to)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "text/csv; charset=utf-8")
	// A provisional statement says so in its name and in its first line: only a final one never
	// changes (ledgerdb.Statement.Final).
	w.Header().Set("Content-Disposition", fmt.Sprintf(`attachment; filename="statement-%s-%s-%s-%s.csv"`,
		id, from.Format(time.DateOnly), to.Format(time.DateOnly), st.Status()))
	return ledgerdb.WriteStatementCSV(w, st)
}

// dateParam reads a required date (2026-01-02) of the query.
func dateParam(q url.Values, name string) (time.Time, error) {
	value := q.Get(name)
	if value == "" {
		return time.Time{}, badInput("The statement needs a %q date (like 2026-01-02).", name)
	}
	t, err := time.Parse(time.DateOnly, value)
	if err != nil {
		return time.Time{}, badInput("The %q date %q is not a date like 2026-01-02.", name, clip(value))
	}
	return t, nil
}

// clip shortens what a person sent, for a message, by whole characters.
func clip(s string) string { return ledgerdb.Shorten(s, 40) }
