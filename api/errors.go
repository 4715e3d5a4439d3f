package api

import (
	"context"
	"errors"
	"net/http"

	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"go.temporal.io/api/serviceerror"
)

// CodeUnknownKind is the error code of a kind the price list has no price for: 422 when a
// submission names it, 404 when a path does.
const CodeUnknownKind = "unknown_kind"

// apiError is an Error with its HTTP status, returned by handlers.
type apiError struct {
	status int
	body   apitype.Error
}

func (e *apiError) Error() string { return e.body.Code + ": " + e.body.Message }

func newError(status int, code, message string) *apiError {
	return &apiError{status: status, body: apitype.Error{Code: code, Message: message}}
}

// withJob adds the state of a job of the caller, and of their money, to an error.
func (e *apiError) withJob(st jobs.Status) *apiError {
	e.body.State, e.body.MoneyState = string(st.State), string(st.MoneyState)
	return e
}

func (e *apiError) withMoney(m ledgerdb.MoneyState) *apiError {
	e.body.MoneyState = string(m)
	return e
}

// Messages reused by several handlers.
const (
	msgUnauthorized = "Send an active API key as \"Authorization: Bearer <secret>\"; a missing, unknown, expired or revoked key all get this answer. Nothing was done."
	msgForbidden    = "This API key may not act for this account. Nothing was done."
	msgInternal     = "The server failed to answer. If this was a submission, check the job with GET /v1/jobs/{id} before anything else: 404 means it was not received and you were not charged."
	msgUnavailable  = "The server could not reach its ledger or Temporal in time. Retry the same request with the same ID; a job is never charged twice."
)

// timedOut reports whether err is a deadline or a cancellation: the request's own (a context
// error), or Temporal's, which reports the deadline the SDK passed on in a gRPC status a moment
// before the request's context itself expires.
func timedOut(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	var canceled *serviceerror.Canceled
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.As(err, &deadline) || errors.As(err, &canceled)
}

// fromDomain maps the ledger's and the job service's errors to the API's answers. Errors it does not
// know are 500 (or 503 when a deadline or connection failed), with the details left to the log.
func fromDomain(err error) *apiError {
	var ae *apiError
	var invalid *ledgerdb.InvalidInputError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &invalid):
		return newError(http.StatusBadRequest, "invalid_input", invalid.Error()+". Nothing was written.")
	case errors.Is(err, ledgerdb.ErrInvalidInput):
		return newError(http.StatusBadRequest, "invalid_input", "Invalid input. Nothing was written.")
	case errors.Is(err, ledgerdb.ErrJobNotFound):
		return newError(http.StatusNotFound, "not_received", jobs.NotReceivedMessage).withMoney(ledgerdb.MoneyNotCharged)
	case errors.Is(err, ledgerdb.ErrGone):
		return newError(http.StatusGone, "deleted", "This job was deleted; its ID can never be used again. This request charged nothing.")
	case errors.Is(err, ledgerdb.ErrConflict):
		return newError(http.StatusConflict, "conflict", "This ID was already used with a different request. This request charged nothing; use a new ID for a new job.")
	case errors.Is(err, ledgerdb.ErrUnknownAccount):
		return newError(http.StatusNotFound, "unknown_account", "No such account. Nothing was written.")
	case errors.Is(err, ledgerdb.ErrUnknownKind):
		return newError(http.StatusNotFound, CodeUnknownKind, "No price was ever set for this kind; GET /v1/prices lists the kinds.")
	case errors.Is(err, ledgerdb.ErrOverflow), errors.Is(err, ledgerdb.ErrBalanceOutOfRange):
		return newError(http.StatusUnprocessableEntity, "out_of_range", "The amount would take the balance out of the range in which every pending refund and reclaim still fits. Nothing was written.")
	case errors.Is(err, ledgerdb.ErrNotStarted):
		return newError(http.StatusConflict, "not_started", "This job has not started: its charge is still being decided, or it was rejected, so it has no result to take. Nothing was written.")
	case timedOut(err):
		return newError(http.StatusServiceUnavailable, "unavailable", msgUnavailable).withMoney("unknown")
	}
	return newError(http.StatusInternalServerError, "internal", msgInternal)
}
