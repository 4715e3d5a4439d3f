package ledgerdb

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// Limits of one page of [Store.ListJobs].
const (
	// DefaultJobPage is a page's size when the caller names none.
	DefaultJobPage = 50
	// MaxJobPage is the largest page.
	MaxJobPage = 200
)

// JobFilter selects a page of one account's jobs for [Store.ListJobs]. Its conditions all hold
// for every job listed.
type JobFilter struct {
	// AccountID is the account whose jobs are listed; no other account's ever are.
	AccountID string
	// States keeps jobs in any of these states; every state when empty.
	States []State
	// DeadLettered, when set, keeps the dead letters only (true: refunded jobs, whose work failed
	// for good and which wait for a late result or a redrive) or every other job (false).
	DeadLettered *bool
	// CreatedAfter and CreatedBefore keep jobs created strictly after and strictly before them;
	// the zero time bounds nothing.
	CreatedAfter, CreatedBefore time.Time
	// Limit is the most jobs on the page, from 1 to MaxJobPage.
	Limit int
	// After continues the list after this position: the previous page's [JobPage.Next].
	After *JobCursor
}

// JobCursor is a position in an account's list of jobs, which runs newest first by creation
// time, then by ID in descending byte order: the jobs after it are those before it in that order.
type JobCursor struct {
	CreatedAt time.Time
	JobID     string
}

// JobPage is a page of an account's jobs.
type JobPage struct {
	// Jobs are the page's jobs, newest first.
	Jobs []Job
	// Next is where the next page starts; nil when this page is the last.
	Next *JobCursor
}

// String is the cursor as an opaque word, safe in a URL: what [ParseJobCursor] reads.
func (c JobCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.FormatInt(c.CreatedAt.UnixMicro(), 10) + "." + c.JobID))
}

// ParseJobCursor reads a cursor written by [JobCursor.String]; anything else is an
// [*InvalidInputError].
func ParseJobCursor(s string) (JobCursor, error) {
	bad := &InvalidInputError{Field: "cursor", Reason: "is not a cursor this server gave; pass next_cursor as it came"}
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return JobCursor{}, bad
	}
	micros, id, ok := strings.Cut(string(raw), ".")
	n, err := strconv.ParseInt(micros, 10, 64)
	if !ok || err != nil || n < 0 || ValidateID("cursor", id) != nil {
		return JobCursor{}, bad
	}
	return JobCursor{CreatedAt: time.UnixMicro(n).UTC(), JobID: id}, nil
}

// Validate refuses a filter the ledger cannot answer truthfully, before anything is read.
func (f JobFilter) Validate() error {
	if err := ValidateID("account ID", f.AccountID); err != nil {
		return err
	}
	for _, state := range f.States {
		if err := ValidateState("state", state); err != nil {
			return err
		}
	}
	if f.Limit < 1 || f.Limit > MaxJobPage {
		return &InvalidInputError{Field: "limit", Reason: fmt.Sprintf("is %d; it must be from 1 to %d", f.Limit, MaxJobPage)}
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		return &InvalidInputError{Field: "created after", Reason: "must be before created before: the range holds no time"}
	}
	if f.After != nil {
		if err := ValidateID("cursor", f.After.JobID); err != nil {
			return err
		}
	}
	return nil
}

// ValidateState checks that s is a state of the machine; field names it in the error.
func ValidateState(field string, s State) error {
	if slices.Contains(States, s) {
		return nil
	}
	names := make([]string, len(States))
	for i, state := range States {
		names[i] = string(state)
	}
	return &InvalidInputError{Field: field, Reason: fmt.Sprintf("holds %q, which is not a state; the states are %s", s, strings.Join(names, ", "))}
}

// ListJobs reads a page of one account's jobs, newest first, as f selects them. A deleted job is
// listed as its tombstone. An account that was never opened is [ErrUnknownAccount]. The
// application role reads the jobs with a plain SELECT, like every read of the ledger.
func (s *Store) ListJobs(ctx context.Context, f JobFilter) (JobPage, error) {
	if err := f.Validate(); err != nil {
		return JobPage{}, err
	}
	if _, err := s.Balance(ctx, f.AccountID); err != nil {
		return JobPage{}, err
	}
	// Only the conditions the filter sets are in the query, so that the cursor's is an index
	// condition: a deep page starts where the last one ended instead of scanning past it. The
	// query is made of constant text; every value is a parameter.
	var args []any
	arg := func(v any) string {
		args = append(args, v)
		return "$" + strconv.Itoa(len(args))
	}
	where := []string{"j.account_id = " + arg(f.AccountID)}
	if len(f.States) > 0 {
		states := make([]string, len(f.States))
		for i, state := range f.States {
			states[i] = string(state)
		}
		where = append(where, "j.state = ANY ("+arg(states)+"::text[])")
	}
	if f.DeadLettered != nil {
		where = append(where, "(j.state = 'refunded') = "+arg(*f.DeadLettered))
	}
	if !f.CreatedAfter.IsZero() {
		where = append(where, "j.created_at > "+arg(f.CreatedAfter))
	}
	if !f.CreatedBefore.IsZero() {
		where = append(where, "j.created_at < "+arg(f.CreatedBefore))
	}
	if f.After != nil {
		// The ledger keys a job "<account>/<job>": within one account, keys order as job IDs do.
		where = append(where, `(j.created_at, j.id COLLATE "C") < (`+arg(f.After.CreatedAt)+`::timestamptz, `+arg(JobKey{AccountID: f.AccountID, JobID: f.After.JobID}.String())+`::text COLLATE "C")`)
	}
	// One job more than asked tells whether another page follows.
	rows, err := s.pool.Query(ctx, `SELECT j FROM jobs j WHERE `+strings.Join(where, " AND ")+`
		ORDER BY j.created_at DESC, j.id COLLATE "C" DESC LIMIT `+arg(f.Limit+1), args...)
	if err != nil {
		return JobPage{}, fmt.Errorf("listing the jobs of account %q: %w", f.AccountID, translateError(err))
	}
	jobs, err := pgx.CollectRows(rows, scanJob)
	if err != nil {
		return JobPage{}, fmt.Errorf("listing the jobs of account %q: %w", f.AccountID, translateError(err))
	}
	page := JobPage{Jobs: jobs}
	if len(jobs) > f.Limit {
		page.Jobs = jobs[:f.Limit]
		last := page.Jobs[f.Limit-1]
		page.Next = &JobCursor{CreatedAt: last.CreatedAt, JobID: last.ID}
	}
	return page, nil
}
