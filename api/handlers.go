package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/workflows"
)

// body is the request's body under the size limit; reading past it fails and closes the connection.
func (s *Server) body(w http.ResponseWriter, r *http.Request) *http.Request {
	r.Body = http.MaxBytesReader(w, r.Body, s.opts.Config.MaxBodyBytes+1)
	return r
}

func forbidden() *apiError { return newError(http.StatusForbidden, "forbidden", msgForbidden) }

// submitJob is POST /v1/jobs: placeholder first, then the workflow, answered once the charge is
// decided.
func (s *Server) submitJob(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	job, err := DecodeSubmit(s.body(w, r).Body, s.opts.Config.MaxBodyBytes)
	if err != nil {
		return 0, nil, err
	}
	if !p.may(job.AccountID) {
		return 0, nil, forbidden()
	}
	ctx := r.Context()
	sub, err := s.opts.Jobs.Submit(ctx, job)
	switch {
	case err == nil, errors.Is(err, ledgerdb.ErrRejected):
		// ErrInsufficientCredits is an ErrRejected: a rejected job is answered by its reason.
		return decided(sub)
	case errors.Is(err, ledgerdb.ErrUnknownAccount):
		return 0, nil, newError(http.StatusUnprocessableEntity, "unknown_account", "No such account. Nothing was written; you were not charged.")
	case errors.Is(err, ledgerdb.ErrUnknownKind):
		// 422 like an unknown account: the body is well formed, but names what the ledger lacks.
		return 0, nil, newError(http.StatusUnprocessableEntity, CodeUnknownKind, fmt.Sprintf(
			"No price is set for kind %q: prices are set by the server, and GET /v1/prices lists the kinds. Nothing was written; you were not charged.", job.Kind))
	case isMaxUnitsError(err):
		return 0, nil, fieldError(err, "max_units")
	case errors.Is(err, ledgerdb.ErrGone), errors.Is(err, ledgerdb.ErrConflict):
		return 0, nil, s.aboutExisting(job.Key(), fromDomain(err))
	case errors.Is(err, ledgerdb.ErrInvalidInput):
		return 0, nil, err
	}
	// The placeholder may or may not be written and the charge may or may not be decided: ask
	// the ledger, which is the record, with a little time of its own.
	readCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	st, readErr := s.opts.Jobs.Status(readCtx, job.Key())
	switch {
	case errors.Is(readErr, ledgerdb.ErrJobNotFound):
		return 0, nil, newError(http.StatusServiceUnavailable, "unavailable",
			"Not received by the server — you were not charged. Retry the same request with the same ID.").withMoney(ledgerdb.MoneyNotCharged)
	case readErr != nil:
		return 0, nil, err
	case st.State != ledgerdb.StateSubmitting:
		// Decided, whether by this request or an earlier one: answered as the same request again,
		// which charges nothing, by where the job's money stands.
		return decided(jobs.Submission{Status: st, Duplicate: true})
	case timedOut(err) || ctx.Err() != nil:
		// Slow is not failed: the job is received and its charge is being decided.
		return http.StatusAccepted, apitype.Submission{Status: statusOf(st)}, nil
	}
	// Received, and no run is known to decide the charge: the same request again starts one (and
	// the reconcile pass would). Nothing was charged yet, but the charge is still to come, so the
	// answer says nothing of the money beyond that (money state pending).
	return 0, nil, newError(http.StatusServiceUnavailable, "unavailable",
		"Received, but the job could not be started yet, so its charge is not decided. Retry the same request with the same ID: it is charged once at most.").withJob(st)
}

// decided answers a submission whose charge is decided, or still being decided, by where the
// job's money stands when the answer is written (docs/api.md, "Submission answers"), so that the
// status code never says more than the body: 202 while the charge is being decided (pending: poll
// the ID); 201 only when this request's charge stands (charged: running, delivered or recovered);
// 200 when the answer charges nothing — the same request again (the original job as it stands), or
// a job whose charge was refunded before the answer (its workflow stopped as the charge committed:
// refunded, stopped_by_operator), which a 201 would tell a client is charged and running; 402 or
// 409 when the job was rejected (not charged), by its reason.
func decided(sub jobs.Submission) (int, any, error) {
	st := sub.Status
	switch {
	case st.State == ledgerdb.StateRejected && st.Reason == ledgerdb.ReasonInsufficientCredits:
		return 0, nil, newError(http.StatusPaymentRequired, "insufficient_credits",
			jobs.RejectedMessage(ledgerdb.RejectInsufficientCredits)).withJob(st)
	case st.State == ledgerdb.StateRejected:
		// Rejected for another reason than credits: its workflow was stopped before charging it,
		// or its workflow ID is another program's. Topping up would not help; a new ID does.
		return 0, nil, newError(http.StatusConflict, "rejected", st.Message).withJob(st)
	case st.State == ledgerdb.StateSubmitting:
		return http.StatusAccepted, submissionOf(sub), nil
	case !sub.Duplicate && st.MoneyState == ledgerdb.MoneyCharged:
		return http.StatusCreated, submissionOf(sub), nil
	}
	return http.StatusOK, submissionOf(sub), nil
}

// aboutExisting completes a 409 or 410 for an ID that exists in the caller's account with the
// state of the job and its money. (The request was checked against the key first: a job ID
// names a job of the caller's account only.)
func (s *Server) aboutExisting(key ledgerdb.JobKey, e *apiError) *apiError {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if st, err := s.opts.Jobs.Status(ctx, key); err == nil {
		e.withJob(st)
	}
	return e
}

// jobKey is the job a request names: the path's job ID in the account the request acts for — the
// account_id query parameter, which a key of one account may leave out. Job IDs belong to their
// account, so a key that may not act for the account it names is answered exactly as for a job
// that was never submitted: another tenant's IDs do not exist for it, and their existence is
// not told by a 403.
func (s *Server) jobKey(r *http.Request, p *principal) (ledgerdb.JobKey, error) {
	id, err := pathID(r, "job ID")
	if err != nil {
		return ledgerdb.JobKey{}, err
	}
	account := r.URL.Query().Get("account_id")
	if account == "" {
		account = p.onlyAccount()
		if account == "" {
			return ledgerdb.JobKey{}, badRequest("Query parameter \"account_id\" is required with this key: job IDs belong to their account")
		}
	}
	if err := ledgerdb.ValidateID("account ID", account); err != nil {
		return ledgerdb.JobKey{}, err
	}
	key := ledgerdb.JobKey{AccountID: account, JobID: id}
	if !p.may(account) {
		return ledgerdb.JobKey{}, fmt.Errorf("job %s: %w", key, ledgerdb.ErrJobNotFound)
	}
	return key, nil
}

// ownJob reads the job of the path in the caller's account: 404 when the ID never reached the
// ledger in that account (or names another tenant's account; see jobKey).
func (s *Server) ownJob(r *http.Request, p *principal) (jobs.Status, error) {
	key, err := s.jobKey(r, p)
	if err != nil {
		return jobs.Status{}, err
	}
	return s.opts.Jobs.Status(r.Context(), key)
}

// gone is the 410 of a deleted job of the caller, with the money state it kept.
func gone(st jobs.Status) *apiError {
	return newError(http.StatusGone, "deleted", st.Message).withJob(st)
}

// getJob is GET /v1/jobs/{id}.
func (s *Server) getJob(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	st, err := s.ownJob(r, p)
	if err != nil {
		return 0, nil, err
	}
	if st.State == ledgerdb.StateDeleted {
		return 0, nil, gone(st)
	}
	return http.StatusOK, statusOf(st), nil
}

// deleteJob is DELETE /v1/jobs/{id}: a tombstone for a settled job. Deleting a deleted job again
// answers its tombstone (200): a DELETE delivered twice ends the same.
func (s *Server) deleteJob(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	st, err := s.ownJob(r, p)
	if err != nil {
		return 0, nil, err
	}
	deleted, err := s.opts.Jobs.Delete(r.Context(), st.Key())
	if errors.Is(err, ledgerdb.ErrJobActive) {
		if current, readErr := s.opts.Jobs.Status(r.Context(), st.Key()); readErr == nil {
			st = current
		}
		return 0, nil, newError(http.StatusConflict, "job_active", fmt.Sprintf(
			"The job is %s and cannot be deleted until it is settled: its records are the evidence for reconciliation. Nothing was changed.", st.State)).withJob(st)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, statusOf(deleted), nil
}

// isMaxUnitsError reports whether the ledger refused a submission's maximum of units (above the
// kind's own), which the API names by the body's field.
func isMaxUnitsError(err error) bool {
	var invalid *ledgerdb.InvalidInputError
	return errors.As(err, &invalid) && invalid.Field == "max units"
}

// reportResult is POST /v1/jobs/{id}/result: a result landed, possibly late. It never carries an
// amount and never charges twice; the usage it reports settles a metered job, capped at its hold.
func (s *Server) reportResult(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	st, err := s.ownJob(r, p)
	if err != nil {
		return 0, nil, err
	}
	res, err := decodeResult(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, time.Now())
	if err != nil {
		return 0, nil, err
	}
	if !st.TakesResult() {
		// A deleted refunded job takes its late result: deletion never cancels what delivered
		// work costs. Other tombstones have nothing left to bill.
		return 0, nil, gone(st)
	}
	report, err := s.opts.Jobs.ReportResult(r.Context(), st.Key(), res)
	if errors.Is(err, ledgerdb.ErrConflict) {
		// The attempt's first result stands: this is no submission's conflict, and no new ID helps.
		return 0, nil, s.aboutExisting(st.Key(), newError(http.StatusConflict, "conflict", jobs.ResultConflictMessage))
	}
	if err != nil {
		return 0, nil, err
	}
	if report.Path == jobs.PathRecorded {
		// Durable, not yet applied: Temporal was unreachable. The reconcile pass applies it.
		return http.StatusAccepted, resultReportOf(report), nil
	}
	return http.StatusOK, resultReportOf(report), nil
}

// redriveJob is POST /v1/jobs/{id}/redrive (admin): run a dead letter's work again.
func (s *Server) redriveJob(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	st, err := s.ownJob(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req apitype.RedriveRequest
	if err := decodeJSON(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, &req, true); err != nil {
		return 0, nil, err
	}
	if req.By == "" {
		req.By = "api"
	}
	if err := validateText("by", req.By, workflows.MaxRedriveByLength); err != nil {
		return 0, nil, err
	}
	if err := validateText("note", req.Note, ledgerdb.MaxTextLength); err != nil {
		return 0, nil, err
	}
	if st.State == ledgerdb.StateDeleted {
		return 0, nil, gone(st)
	}
	redriven, err := s.opts.Jobs.Redrive(r.Context(), st.Key(), req.By, req.Note)
	if errors.Is(err, jobs.ErrNotDeadLettered) {
		return 0, nil, newError(http.StatusConflict, "not_dead_lettered",
			fmt.Sprintf("Only a refunded (dead-lettered) job can be re-driven; this one is %s. Nothing was changed.", redriven.State)).withJob(redriven)
	}
	if errors.Is(err, jobs.ErrWorkflowIDTaken) {
		return 0, nil, newError(http.StatusConflict, "workflow_id_taken",
			"Another program's workflow holds this job's workflow ID, so its work cannot run again until that workflow closes. Nothing was changed.").withJob(redriven)
	}
	if err != nil {
		return 0, nil, err
	}
	return http.StatusAccepted, statusOf(redriven), nil
}

// ownAccount reads the account of the path after checking the key may act for it, so a key
// learns nothing — not even existence — of accounts outside its scope.
func ownAccount(r *http.Request, p *principal) (string, error) {
	id, err := pathID(r, "account ID")
	if err != nil {
		return "", err
	}
	if !p.may(id) {
		return "", forbidden()
	}
	return id, nil
}

// getAccount is GET /v1/accounts/{id}.
func (s *Server) getAccount(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	balance, err := s.opts.Ledger.Balance(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, apitype.Account{AccountID: id, Balance: balance}, nil
}

// getLedger is GET /v1/accounts/{id}/ledger?after=&limit=.
func (s *Server) getLedger(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	page, err := PageParams(q.Get("after"), q.Get("limit"))
	if err != nil {
		return 0, nil, err
	}
	h, err := s.opts.Ledger.History(r.Context(), id, page)
	if err != nil {
		return 0, nil, err
	}
	out := apitype.LedgerPage{AccountID: id, Entries: []apitype.LedgerEntry{}, NextAfter: h.NextAfterID}
	for _, e := range h.Entries {
		out.Entries = append(out.Entries, apitype.LedgerEntry{ID: e.ID, Kind: string(e.Kind), Amount: e.Amount, BalanceAfter: e.BalanceAfter,
			JobID: e.JobID, Key: e.Key, Memo: e.Memo, CreatedAt: e.CreatedAt})
	}
	return http.StatusOK, out, nil
}

// grant is POST /v1/accounts/{id}/grants (admin): a top-up, once per key.
func (s *Server) grant(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	credit, err := decodeGrant(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, id)
	if err != nil {
		return 0, nil, err
	}
	posting, err := s.opts.Ledger.Grant(r.Context(), credit)
	var invalid *ledgerdb.InvalidInputError
	switch {
	case errors.Is(err, ledgerdb.ErrConflict):
		return 0, nil, newError(http.StatusConflict, "conflict", "This key was already used for a different grant: another amount, or other block terms. Nothing was written.")
	case errors.As(err, &invalid):
		// The ledger's refusal names the body's field (an expiry that has passed): expires_at.
		return 0, nil, badRequest("Field %q %s", invalid.Field, invalid.Reason)
	case err != nil:
		return 0, nil, err
	}
	status := http.StatusCreated
	if posting.Outcome == ledgerdb.AlreadyApplied {
		status = http.StatusOK
	}
	return status, apitype.Grant{AccountID: id, Outcome: string(posting.Outcome), EntryID: posting.EntryID,
		BalanceAfter: posting.BalanceAfter, Pending: credit.Pending && posting.EntryID == 0}, nil
}

// listPrices is GET /v1/prices: the price list, for every key, because a customer must be able
// to see what a job of each kind will hold and cost before submitting it.
func (s *Server) listPrices(_ http.ResponseWriter, r *http.Request, _ *principal) (int, any, error) {
	prices, err := s.opts.Ledger.Prices(r.Context())
	if err != nil {
		return 0, nil, err
	}
	if prices == nil {
		prices = []ledgerdb.Price{}
	}
	return http.StatusOK, apitype.PriceList{Prices: each(prices, priceOf)}, nil
}

// priceHistory is GET /v1/prices/{kind}: every version of a kind's price, so a customer can see
// the price an older job was charged at.
func (s *Server) priceHistory(_ http.ResponseWriter, r *http.Request, _ *principal) (int, any, error) {
	kind, err := pathKind(r)
	if err != nil {
		return 0, nil, err
	}
	versions, err := s.opts.Ledger.PriceHistory(r.Context(), kind)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, apitype.PriceHistory{Kind: kind, Versions: each(versions, priceOf)}, nil
}

// setPrice is PUT /v1/prices/{kind} (admin): a new version of the kind's price, for jobs
// submitted after it. The same figures as the current version again write nothing (200).
func (s *Server) setPrice(w http.ResponseWriter, r *http.Request, _ *principal) (int, any, error) {
	kind, err := pathKind(r)
	if err != nil {
		return 0, nil, err
	}
	price, err := DecodePrice(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, kind)
	if err != nil {
		return 0, nil, err
	}
	set, outcome, err := s.opts.Ledger.SetPrice(r.Context(), price)
	if err != nil {
		return 0, nil, err
	}
	status := http.StatusCreated
	if outcome == ledgerdb.AlreadyApplied {
		status = http.StatusOK
	}
	return status, apitype.PriceSet{Outcome: string(outcome), Price: priceOf(set)}, nil
}
