package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// MaxRefLength is the longest input_ref or output_ref, in bytes.
const MaxRefLength = 2048

// SubmitRequest is the body of POST /v1/jobs.
type SubmitRequest struct {
	// JobID is the client-generated job ID; a retry must reuse it.
	JobID string `json:"job_id"`
	// AccountID is the paying account; the key must be scoped to it.
	AccountID string `json:"account_id"`
	// Cost is the price in whole credits, above zero.
	Cost int64 `json:"cost"`
	// InputRef points at the job's input. With the account and cost it is what a repeated
	// submission must match to be answered with the original job.
	InputRef string `json:"input_ref"`
}

// ResultRequest is the body of POST /v1/jobs/{id}/result. It carries no amount: the ledger
// reclaims the job's recorded cost (money rule 5).
type ResultRequest struct {
	// Attempt is the attempt that produced the result.
	Attempt int `json:"attempt"`
	// OutputRef points at the result.
	OutputRef string `json:"output_ref"`
	// FinishedAt is when the work finished; the time of the request when absent.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
}

// RedriveRequest is the optional body of POST /v1/jobs/{id}/redrive.
type RedriveRequest struct {
	// By names who asks, for the workflow's timeline; "api" when empty.
	By string `json:"by"`
	// Note says why.
	Note string `json:"note"`
}

// GrantRequest is the body of POST /v1/accounts/{id}/grants.
type GrantRequest struct {
	// Amount is the top-up in whole credits, above zero.
	Amount int64 `json:"amount"`
	// Key makes the grant idempotent: the same key again answers the original grant.
	Key string `json:"key"`
	// Memo is kept on the ledger row for support.
	Memo string `json:"memo"`
}

// badRequest is a 400 that names what is wrong; nothing was written.
func badRequest(format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, "invalid_input", fmt.Sprintf(format, args...)+". Nothing was written.")
}

// decodeJSON reads one JSON object of at most max bytes into dst, refusing unknown fields and
// trailing data. An empty body is allowed only when optional.
func decodeJSON(body io.Reader, max int64, dst any, optional bool) error {
	// One byte more than allowed tells an oversize body from one of exactly max bytes.
	limited := io.LimitReader(body, max+1)
	data, err := io.ReadAll(limited)
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return newError(http.StatusBadRequest, "body_too_large", fmt.Sprintf("The body is larger than %d bytes. Nothing was written.", max))
		}
		return badRequest("The body could not be read")
	}
	if int64(len(data)) > max {
		return newError(http.StatusBadRequest, "body_too_large", fmt.Sprintf("The body is larger than %d bytes. Nothing was written.", max))
	}
	if len(strings.TrimSpace(string(data))) == 0 {
		if optional {
			return nil
		}
		return badRequest("The body is empty; a JSON object is needed")
	}
	if !utf8.Valid(data) {
		return badRequest("The body is not valid UTF-8")
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		switch {
		case errors.As(err, &syntax):
			return badRequest("The body is not valid JSON (at byte %d)", syntax.Offset)
		case errors.As(err, &typ) && typ.Field != "":
			return badRequest("Field %q must be a %s that fits; got a JSON %s", typ.Field, jsonKind(typ.Type.Kind().String()), typ.Value)
		case errors.As(err, &typ):
			return badRequest("The body must be a JSON object; got a JSON %s", typ.Value)
		case strings.HasPrefix(err.Error(), "json: unknown field "):
			return badRequest("Unknown field %s", strings.TrimPrefix(err.Error(), "json: unknown field "))
		case errors.Is(err, io.ErrUnexpectedEOF):
			return badRequest("The body is truncated JSON")
		}
		return badRequest("The body is not valid JSON")
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return badRequest("The body must hold one JSON object and nothing after it")
	}
	return nil
}

func jsonKind(goKind string) string {
	switch {
	case strings.HasPrefix(goKind, "int"), strings.HasPrefix(goKind, "uint"):
		return "whole number"
	case goKind == "ptr", goKind == "struct":
		return "time (RFC 3339)"
	}
	return goKind
}

// validateText checks free text (references, notes) before it is stored or sent anywhere.
func validateText(field, text string, max int) error {
	if len(text) > max {
		return badRequest("Field %q is %d bytes; at most %d are allowed", field, len(text), max)
	}
	for _, r := range text {
		if r < 0x20 || r == 0x7f {
			return badRequest("Field %q must not contain control characters", field)
		}
	}
	return nil
}

// DecodeSubmit reads and checks the body of POST /v1/jobs into the job to submit. Everything it
// accepts passes the ledger's own checks, so a refused job writes nothing and an accepted one is
// refused by the ledger only for reasons of state (conflict, deleted, credits).
func DecodeSubmit(body io.Reader, maxBytes int64) (jobs.Job, error) {
	var req SubmitRequest
	if err := decodeJSON(body, maxBytes, &req, false); err != nil {
		return jobs.Job{}, err
	}
	if err := ledgerdb.ValidateID("job_id", req.JobID); err != nil {
		return jobs.Job{}, err
	}
	if err := ledgerdb.ValidateID("account_id", req.AccountID); err != nil {
		return jobs.Job{}, err
	}
	if err := ledgerdb.ValidateAmount("cost", req.Cost); err != nil {
		return jobs.Job{}, err
	}
	if err := validateText("input_ref", req.InputRef, MaxRefLength); err != nil {
		return jobs.Job{}, err
	}
	return jobs.Job{ID: req.JobID, AccountID: req.AccountID, Cost: req.Cost, InputRef: req.InputRef}, nil
}

// decodeResult reads the body of POST /v1/jobs/{id}/result.
func decodeResult(body io.Reader, maxBytes int64, now time.Time) (activities.WorkResult, error) {
	var req ResultRequest
	if err := decodeJSON(body, maxBytes, &req, false); err != nil {
		return activities.WorkResult{}, err
	}
	if err := ledgerdb.ValidateAttempt(req.Attempt); err != nil {
		return activities.WorkResult{}, err
	}
	if err := ledgerdb.ValidateOutputRef(req.OutputRef); err != nil {
		return activities.WorkResult{}, err
	}
	res := activities.WorkResult{Attempt: req.Attempt, OutputRef: req.OutputRef, FinishedAt: now.UTC()}
	if req.FinishedAt != nil {
		res.FinishedAt = req.FinishedAt.UTC()
	}
	return res, nil
}

// decodeGrant reads the body of POST /v1/accounts/{id}/grants.
func decodeGrant(body io.Reader, maxBytes int64, accountID string) (ledgerdb.Credit, error) {
	var req GrantRequest
	if err := decodeJSON(body, maxBytes, &req, false); err != nil {
		return ledgerdb.Credit{}, err
	}
	if err := ledgerdb.ValidateAmount("amount", req.Amount); err != nil {
		return ledgerdb.Credit{}, err
	}
	if err := ledgerdb.ValidateID("key", req.Key); err != nil {
		return ledgerdb.Credit{}, err
	}
	if err := validateText("memo", req.Memo, ledgerdb.MaxTextLength); err != nil {
		return ledgerdb.Credit{}, err
	}
	return ledgerdb.Credit{AccountID: accountID, Amount: req.Amount, Key: req.Key, Memo: req.Memo}, nil
}

// pathID is the {id} of a path, checked like every ID of the ledger.
func pathID(r *http.Request, field string) (string, error) {
	id := r.PathValue("id")
	if err := ledgerdb.ValidateID(field, id); err != nil {
		return "", err
	}
	return id, nil
}

// PageParams reads the ledger page's query: after (a row ID, default 0) and limit (1 to 1000,
// default 100).
func PageParams(after, limit string) (ledgerdb.HistoryPage, error) {
	var page ledgerdb.HistoryPage
	if after != "" {
		n, err := strconv.ParseInt(after, 10, 64)
		if err != nil || n < 0 {
			return page, badRequest("Query parameter \"after\" must be a ledger row ID (a whole number, 0 or more)")
		}
		page.AfterID = n
	}
	if limit != "" {
		n, err := strconv.Atoi(limit)
		if err != nil || n < 1 || n > 1000 {
			return page, badRequest("Query parameter \"limit\" must be a whole number from 1 to 1000")
		}
		page.Limit = n
	}
	return page, nil
}
