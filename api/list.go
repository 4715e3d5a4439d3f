package api

import (
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
)

// listParams are the query parameters GET /v1/jobs takes; state may be repeated, the others may
// be given once.
var listParams = []string{"account_id", "state", "dead_lettered", "created_after", "created_before", "limit", "cursor"}

// listJobs is GET /v1/jobs: a page of one account's jobs. A bad filter is refused before anything
// is read.
func (s *Server) listJobs(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	f, err := jobFilter(r.URL.RawQuery)
	if err != nil {
		return 0, nil, err
	}
	if f.AccountID, err = listAccount(p, f.AccountID); err != nil {
		return 0, nil, err
	}
	list, err := s.opts.Jobs.List(r.Context(), f)
	if err != nil {
		return 0, nil, err
	}
	out := apitype.JobList{Jobs: each(list.Jobs, statusOf)}
	if list.Next != nil {
		out.NextCursor = list.Next.String()
	}
	return http.StatusOK, out, nil
}

// listAccount is the account a list is for: the one account_id names, which the key must act
// for, or, when it names none, a customer key's own.
func listAccount(p *principal, named string) (string, error) {
	if named != "" {
		if !p.may(named) {
			return "", forbidden()
		}
		return named, nil
	}
	if account := p.onlyAccount(); account != "" {
		return account, nil
	}
	return "", badRequest("Query parameter %q is required: this key acts for every account", "account_id")
}

// jobFilter reads GET /v1/jobs's query into the ledger's filter (its account as named, or empty).
func jobFilter(rawQuery string) (ledgerdb.JobFilter, error) {
	f := ledgerdb.JobFilter{Limit: ledgerdb.DefaultJobPage}
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return f, badRequest("The query string cannot be read")
	}
	for name, values := range q {
		switch {
		case !slices.Contains(listParams, name):
			return f, badRequest("Unknown query parameter %q; GET /v1/jobs takes %s", name, strings.Join(listParams, ", "))
		case name != "state" && len(values) > 1:
			return f, badRequest("Query parameter %q is given %d times; give it once", name, len(values))
		}
	}
	if id := q.Get("account_id"); q.Has("account_id") {
		if err := ledgerdb.ValidateID("account_id", id); err != nil {
			return f, paramError(err, "account_id")
		}
		f.AccountID = id
	}
	for _, value := range q["state"] {
		for _, name := range strings.Split(value, ",") {
			state := ledgerdb.State(name)
			if err := ledgerdb.ValidateState("state", state); err != nil {
				return f, paramError(err, "state")
			}
			if !slices.Contains(f.States, state) {
				f.States = append(f.States, state)
			}
		}
	}
	if q.Has("dead_lettered") {
		switch q.Get("dead_lettered") {
		case "true":
			f.DeadLettered = new(true)
		case "false":
			f.DeadLettered = new(false)
		default:
			return f, badRequest("Query parameter %q must be true or false", "dead_lettered")
		}
	}
	for _, bound := range []struct {
		name string
		to   *time.Time
	}{{"created_after", &f.CreatedAfter}, {"created_before", &f.CreatedBefore}} {
		if !q.Has(bound.name) {
			continue
		}
		t, err := time.Parse(time.RFC3339Nano, q.Get(bound.name))
		if err != nil {
			return f, badRequest("Query parameter %q must be a time in RFC 3339 (2026-01-02T15:04:05Z)", bound.name)
		}
		*bound.to = t
	}
	if !f.CreatedAfter.IsZero() && !f.CreatedBefore.IsZero() && !f.CreatedAfter.Before(f.CreatedBefore) {
		return f, badRequest("Query parameter %q must be before %q: the range holds no time", "created_after", "created_before")
	}
	if q.Has("limit") {
		n, err := strconv.Atoi(q.Get("limit"))
		if err != nil || n < 1 || n > ledgerdb.MaxJobPage {
			return f, badRequest("Query parameter %q must be a whole number from 1 to %d", "limit", ledgerdb.MaxJobPage)
		}
		f.Limit = n
	}
	if q.Has("cursor") {
		cursor, err := ledgerdb.ParseJobCursor(q.Get("cursor"))
		if err != nil {
			return f, paramError(err, "cursor")
		}
		f.After = &cursor
	}
	return f, nil
}

// ParseJobFilter reads a query string as GET /v1/jobs reads it (the same parameters, the same
// checks), for another door that lists jobs — the console — so both take the same filters. An
// error's text says which parameter is wrong and why.
func ParseJobFilter(rawQuery string) (ledgerdb.JobFilter, error) {
	f, err := jobFilter(rawQuery)
	var ae *apiError
	if errors.As(err, &ae) {
		return f, errors.New(ae.body.Message)
	}
	return f, err
}

// paramError names, in a 400, the query parameter whose value the ledger refused.
func paramError(err error, name string) error {
	var invalid *ledgerdb.InvalidInputError
	if errors.As(err, &invalid) {
		return badRequest("Query parameter %q %s", name, invalid.Reason)
	}
	return err
}
