package apiclient

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/jobbill/jobbill/apitype"
)

// Status reads a job once (GET /v1/jobs/{id}). An error answer is an *APIError: the API's 404
// not_received (never arrived, nothing charged), its 410 deleted (money state kept), or another
// answer — one that is not the API's has the code http_<status> — whose money state is
// [MoneyUnknown] unless the answer told it.
func (c *Client) Status(ctx context.Context, jobID string) (apitype.Status, error) {
	if _, err := pathID("job ID", jobID); err != nil {
		return apitype.Status{}, err
	}
	obs, st, apiErr := c.look(ctx, jobID, c.AccountID)
	switch {
	case obs.Err != nil:
		return apitype.Status{}, obs.Err
	case obs.StatusCode != http.StatusOK:
		return apitype.Status{}, apiErr
	}
	return st, nil
}

// DeleteJob deletes a settled job (DELETE /v1/jobs/{id}) and answers its tombstone: state
// deleted, with the money state it had, which deletion itself never changes. Deletion hides the
// job's output, never an obligation: a refunded job's late result still takes the refund back,
// and the tombstone then reads money state charged with the figures. Deleting it again answers
// the same tombstone. A job still submitting or running is an *APIError with code job_active,
// and nothing changes. A deleted ID can never be used again.
func (c *Client) DeleteJob(ctx context.Context, jobID string) (apitype.Status, error) {
	id, err := pathID("job ID", jobID)
	if err != nil {
		return apitype.Status{}, err
	}
	var st apitype.Status
	err = c.call(ctx, http.MethodDelete, "/v1/jobs/"+id, c.jobQuery(""), nil, &st, http.StatusOK)
	return st, err
}

// ReportResult reports that a job's result landed (POST /v1/jobs/{id}/result), with the units
// its work used. It takes a runner key (the GPU service's) or an admin key: the usage decides what
// the job costs, so a customer key is refused (403). Reporting the same result again is harmless
// (path already_applied); a different result of an attempt that already reported one is an
// *APIError matching [ErrResultConflict] (the first result stands, nothing was charged again). A
// refusal is an *APIError; nothing was written.
func (c *Client) ReportResult(ctx context.Context, jobID string, r apitype.ResultRequest) (apitype.ResultReport, error) {
	id, err := pathID("job ID", jobID)
	if err != nil {
		return apitype.ResultReport{}, err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return apitype.ResultReport{}, err
	}
	var answer apitype.ResultReport
	err = c.call(ctx, http.MethodPost, "/v1/jobs/"+id+"/result", c.jobQuery(""), body, &answer, http.StatusOK, http.StatusAccepted)
	var ae *APIError
	if errors.As(err, &ae) && ae.FromAPI() && ae.StatusCode == http.StatusConflict && ae.Code == CodeConflict {
		ae.is = ErrResultConflict
	}
	return answer, err
}

// ListOptions filters and pages a listing of jobs (GET /v1/jobs). The zero value lists every job
// the key may see, in pages of the server's default size.
type ListOptions struct {
	// State keeps the jobs in one of these states (submitting, running, delivered …); every
	// state when empty.
	State []string
	// DeadLettered, when set, keeps only the dead-lettered jobs (true) or only the others (false).
	DeadLettered *bool
	// CreatedAfter and CreatedBefore, when not zero, bound when the jobs were created.
	CreatedAfter, CreatedBefore time.Time
	// Limit is the most jobs on one page; the server's default when zero.
	Limit int
	// Cursor is the previous page's NextCursor; the first page when empty.
	Cursor string
}

// query is the listing's query string, or an error, before anything is sent, for options no
// server could answer.
func (o ListOptions) query() (url.Values, error) {
	q := url.Values{}
	for _, s := range o.State {
		if s == "" || strings.Contains(s, ",") {
			return nil, fmt.Errorf("%w: state %q must be one state name, without commas", ErrInvalidInput, s)
		}
	}
	if len(o.State) > 0 {
		q.Set("state", strings.Join(o.State, ","))
	}
	if o.DeadLettered != nil {
		q.Set("dead_lettered", strconv.FormatBool(*o.DeadLettered))
	}
	if !o.CreatedAfter.IsZero() && !o.CreatedBefore.IsZero() && !o.CreatedAfter.Before(o.CreatedBefore) {
		return nil, fmt.Errorf("%w: CreatedAfter (%s) must be before CreatedBefore (%s)", ErrInvalidInput,
			o.CreatedAfter.Format(time.RFC3339), o.CreatedBefore.Format(time.RFC3339))
	}
	if !o.CreatedAfter.IsZero() {
		q.Set("created_after", o.CreatedAfter.UTC().Format(time.RFC3339Nano))
	}
	if !o.CreatedBefore.IsZero() {
		q.Set("created_before", o.CreatedBefore.UTC().Format(time.RFC3339Nano))
	}
	switch {
	case o.Limit < 0:
		return nil, fmt.Errorf("%w: limit %d must be 0 (the server's default) or more", ErrInvalidInput, o.Limit)
	case o.Limit > 0:
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.Cursor != "" {
		q.Set("cursor", o.Cursor)
	}
	return q, nil
}

// ListJobs reads one page of the jobs the key may see (GET /v1/jobs), filtered by opts; pass
// the page's NextCursor as opts.Cursor for the next one. Options no server could answer (a
// negative limit, a state with a comma, CreatedAfter not before CreatedBefore) are refused with
// ErrInvalidInput before anything is sent.
func (c *Client) ListJobs(ctx context.Context, opts ListOptions) (apitype.JobList, error) {
	q, err := opts.query()
	if err != nil {
		return apitype.JobList{}, err
	}
	for k, v := range c.jobQuery("") {
		q[k] = v
	}
	var page apitype.JobList
	err = c.call(ctx, http.MethodGet, "/v1/jobs", q, nil, &page, http.StatusOK)
	return page, err
}
