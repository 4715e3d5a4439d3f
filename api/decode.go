package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/internal/jsonint"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// MaxRefLength is the longest input_ref or output_ref, in bytes: the ledger's own bounds.
const MaxRefLength = ledgerdb.MaxInputRefLength

// badRequest is a 400 that names what is wrong; nothing was written.
func badRequest(format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, "invalid_input", fmt.Sprintf(format, args...)+". Nothing was written.")
}

// decodeJSON reads one JSON object of at most max bytes into dst. Every key must name one of
// dst's fields exactly and appear once (see exactKeys); nothing may follow the object. An empty
// body is allowed only when optional.
func decodeJSON(body io.Reader, max int64, dst any, optional bool) error {
	data, err := readBody(body, max, optional)
	if err != nil || data == nil {
		return err
	}
	return decodeObject(data, dst, nil)
}

// readBody reads a body of at most max bytes, refusing a larger one with 413 and anything but
// UTF-8 with 400. It answers nil for an empty body when optional.
func readBody(body io.Reader, max int64, optional bool) ([]byte, error) {
	// One byte more than allowed tells an oversize body from one of exactly max bytes.
	data, err := io.ReadAll(io.LimitReader(body, max+1))
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig) || int64(len(data)) > max:
		return nil, newError(http.StatusRequestEntityTooLarge, "body_too_large", fmt.Sprintf("The body is larger than %d bytes. Nothing was written.", max))
	case err != nil:
		return nil, badRequest("The body could not be read")
	case len(strings.TrimSpace(string(data))) == 0 && optional:
		return nil, nil
	case len(strings.TrimSpace(string(data))) == 0:
		return nil, badRequest("The body is empty; a JSON object is needed")
	case !utf8.Valid(data):
		return nil, badRequest("The body is not valid UTF-8")
	}
	return data, nil
}

// decodeObject decodes data, one JSON object, into dst once its keys pass exactKeys. refuse, when
// set, sees each key first and may refuse the body for it with an answer of its own. Its integers
// are read as every language writes them (jsonint.Normalize: 50.0 and 5e1 are 50, 50.5 is
// refused naming the field).
func decodeObject(data []byte, dst any, refuse func(key string) error) error {
	if keys, ok := objectKeys(data); ok {
		if refuse != nil {
			for _, key := range keys {
				if err := refuse(key); err != nil {
					return err
				}
			}
		}
		if err := exactKeys(keys, dst); err != nil {
			return err
		}
	}
	dec := json.NewDecoder(bytes.NewReader(jsonint.Normalize(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		var syntax *json.SyntaxError
		var typ *json.UnmarshalTypeError
		if field, reason, ok := jsonint.Refusal(err); ok {
			return badRequest("Field %q %s", field, reason)
		}
		switch {
		case errors.As(err, &syntax):
			return badRequest("The body is not valid JSON (at byte %d)", syntax.Offset)
		case errors.As(err, &typ) && typ.Field != "":
			// The bodies are flat: the last part of the path is the field as the caller wrote it
			// (the path also names the Go struct a field is embedded from).
			field := typ.Field[strings.LastIndex(typ.Field, ".")+1:]
			return badRequest("Field %q must be a %s that fits; got a JSON %s", field, jsonKind(typ.Type.Kind().String()), typ.Value)
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

// validateText applies the ledger's one text rule ([ledgerdb.ValidateText]) to a body's field,
// naming the field as the body does.
func validateText(field, text string, max int) error {
	return fieldError(ledgerdb.ValidateText(field, text, max), field)
}

// amountFields are the keys under which a body might carry an amount. Prices are set by the
// server, so a submission or a result that carries one is refused by name rather than as an
// unknown field — in any letter case, so that "Cost" is caught too: a client that tries to name its
// own price is told it cannot, and what to send instead.
var amountFields = []string{"cost", "amount", "price", "unit_price", "credits"}

// CodePriceSetByServer is the error code of a body that carries an amount the server sets itself.
const CodePriceSetByServer = "price_set_by_server"

// decodeWithoutAmounts decodes like decodeJSON into dst and refuses a body that carries an amount
// with message (which names the key with %q) before any other complaint about its keys: that one
// says what the caller must change.
func decodeWithoutAmounts(body io.Reader, maxBytes int64, dst any, message string) error {
	data, err := readBody(body, maxBytes, false)
	if err != nil {
		return err
	}
	return decodeObject(data, dst, func(key string) error {
		for _, amount := range amountFields {
			if strings.EqualFold(key, amount) {
				return newError(http.StatusBadRequest, CodePriceSetByServer, fmt.Sprintf(message, key))
			}
		}
		return nil
	})
}

// fieldError names, in a 400, the body's field that the ledger refused under its own name.
func fieldError(err error, field string) error {
	var invalid *ledgerdb.InvalidInputError
	if errors.As(err, &invalid) {
		return badRequest("Field %q %s", field, invalid.Reason)
	}
	return err
}

// DecodeSubmit reads and checks the body of POST /v1/jobs into the job to submit. Everything it
// accepts passes the ledger's own checks, so a refused job writes nothing and an accepted one is
// refused by the ledger only for reasons of state (conflict, deleted, credits) or of the price
// list (a kind without a price, a maximum of units above the kind's). A body that carries an
// amount is refused with code price_set_by_server: prices are set by the server.
func DecodeSubmit(body io.Reader, maxBytes int64) (jobs.Job, error) {
	var req apitype.SubmitRequest
	if err := decodeWithoutAmounts(body, maxBytes, &req,
		"Prices are set by the server: a submission names the job's kind, never an amount, and this one carries %q. "+
			"Send \"kind\" instead (GET /v1/prices lists the kinds and their prices). Nothing was written; you were not charged."); err != nil {
		return jobs.Job{}, err
	}
	if err := ledgerdb.ValidateID("job_id", req.JobID); err != nil {
		return jobs.Job{}, err
	}
	if err := ledgerdb.ValidateID("account_id", req.AccountID); err != nil {
		return jobs.Job{}, err
	}
	if req.Kind == "" {
		return jobs.Job{}, badRequest("Field \"kind\" is required: it names what the job is, and the server's price list says what it costs (GET /v1/prices lists the kinds)")
	}
	if ledgerdb.ValidateKind(req.Kind) != nil {
		return jobs.Job{}, kindError("Field \"kind\"", req.Kind)
	}
	job := jobs.Job{ID: req.JobID, AccountID: req.AccountID, Kind: req.Kind, InputRef: req.InputRef}
	if req.MaxUnits != nil {
		// Zero is refused rather than read as "the kind's maximum": a caller who writes 0 means
		// to hold less, never the most.
		if n := *req.MaxUnits; n < 1 || n > ledgerdb.MaxUnits {
			return jobs.Job{}, badRequest("Field \"max_units\" is %d; it must be a whole number from 1 to the kind's maximum (leave it out to hold the kind's maximum)", n)
		}
		job.MaxUnits = *req.MaxUnits
	}
	if err := fieldError(ledgerdb.ValidateInputRef(req.InputRef), "input_ref"); err != nil {
		return jobs.Job{}, err
	}
	return job, nil
}

// decodeResult reads the body of POST /v1/jobs/{id}/result.
func decodeResult(body io.Reader, maxBytes int64, now time.Time) (activities.WorkResult, error) {
	var req apitype.ResultRequest
	if err := decodeWithoutAmounts(body, maxBytes, &req,
		"A result carries no amount: the server bills the job at the price it was submitted at, for the \"units_used\" "+
			"the result reports. Remove %q. Nothing was written."); err != nil {
		return activities.WorkResult{}, err
	}
	if err := fieldError(ledgerdb.ValidateAttempt(req.Attempt), "attempt"); err != nil {
		return activities.WorkResult{}, err
	}
	if err := ledgerdb.ValidateOutputRef(req.OutputRef); err != nil {
		return activities.WorkResult{}, fieldError(err, "output_ref")
	}
	if err := ledgerdb.ValidateUnitsUsed(req.UnitsUsed); err != nil {
		return activities.WorkResult{}, fieldError(err, "units_used")
	}
	res := activities.WorkResult{Attempt: req.Attempt, OutputRef: req.OutputRef, FinishedAt: now.UTC(), UnitsUsed: req.UnitsUsed}
	if req.FinishedAt != nil {
		res.FinishedAt = req.FinishedAt.UTC()
	}
	return res, nil
}

// DecodePrice reads and checks the body of PUT /v1/prices/{kind} into the price to set. A kind
// sold by the job holds 1 unit when max_units is left out; a metered kind must give its maximum.
func DecodePrice(body io.Reader, maxBytes int64, kind string) (ledgerdb.Price, error) {
	var req apitype.PriceRequest
	if err := decodeJSON(body, maxBytes, &req, false); err != nil {
		return ledgerdb.Price{}, err
	}
	unit := ledgerdb.Unit(req.Unit)
	if unit != ledgerdb.UnitJob && unit != ledgerdb.UnitGPUSecond {
		return ledgerdb.Price{}, badRequest("Field \"unit\" is %q; it must be %q (a fixed price per job) or %q (metered by the GPU-second)",
			req.Unit, ledgerdb.UnitJob, ledgerdb.UnitGPUSecond)
	}
	p := ledgerdb.Price{Kind: kind, Unit: unit, UnitPrice: req.UnitPrice, Memo: req.Memo}
	switch {
	case req.MaxUnits != nil:
		p.MaxUnits = *req.MaxUnits
	case unit == ledgerdb.UnitJob:
		p.MaxUnits = 1
	default:
		return ledgerdb.Price{}, badRequest("Field \"max_units\" is required for unit %q: it is the most GPU-seconds one job may use, which its charge holds", req.Unit)
	}
	if err := validateText("memo", req.Memo, ledgerdb.MaxTextLength); err != nil {
		return ledgerdb.Price{}, err
	}
	if err := p.Validate(); err != nil {
		var invalid *ledgerdb.InvalidInputError
		if errors.As(err, &invalid) {
			if field, ok := priceFields[invalid.Field]; ok {
				return ledgerdb.Price{}, fieldError(err, field)
			}
		}
		return ledgerdb.Price{}, err
	}
	return p, nil
}

// priceFields are the body's names of the fields [ledgerdb.Price.Validate] names in its own words.
var priceFields = map[string]string{"unit price": "unit_price", "max units": "max_units", "memo": "memo"}

// kindError is the 400 of a kind that is not a kind's name, naming where it came from.
func kindError(where, kind string) error {
	return badRequest("%s is %q; a kind is 1 to 64 lower-case letters, digits and . _ -, starting with a letter", where, kind)
}

// pathKind is the {kind} of a path, checked like every kind of the price list.
func pathKind(r *http.Request) (string, error) {
	kind := r.PathValue("kind")
	if ledgerdb.ValidateKind(kind) != nil {
		return "", kindError("The path's kind", kind)
	}
	return kind, nil
}

// decodeGrant reads the body of POST /v1/accounts/{id}/grants: the amount, key and memo, and
// the terms of the credit block the grant creates. Terms the ledger would refuse whenever they
// came are a 400 naming the field, before anything is written; an expiry that has passed is the
// ledger's to refuse (a repeat of a grant made before it is answered as the grant).
func decodeGrant(body io.Reader, maxBytes int64, accountID string) (ledgerdb.Credit, error) {
	var req apitype.GrantRequest
	if err := decodeJSON(body, maxBytes, &req, false); err != nil {
		return ledgerdb.Credit{}, err
	}
	if err := fieldError(ledgerdb.ValidateAmount("amount", req.Amount), "amount"); err != nil {
		return ledgerdb.Credit{}, err
	}
	if err := ledgerdb.ValidateID("key", req.Key); err != nil {
		return ledgerdb.Credit{}, err
	}
	if err := validateText("memo", req.Memo, ledgerdb.MaxTextLength); err != nil {
		return ledgerdb.Credit{}, err
	}
	terms := ledgerdb.BlockTerms{Category: ledgerdb.BlockCategory(req.Category), Priority: req.Priority, CostBasis: req.CostBasis}
	var err error
	if terms.EffectiveAt, err = timeField("effective_at", req.EffectiveAt); err != nil {
		return ledgerdb.Credit{}, err
	}
	if terms.ExpiresAt, err = timeField("expires_at", req.ExpiresAt); err != nil {
		return ledgerdb.Credit{}, err
	}
	var invalid *ledgerdb.InvalidInputError
	if err := terms.Validate(); errors.As(err, &invalid) {
		return ledgerdb.Credit{}, badRequest("Field %q %s", invalid.Field, invalid.Reason)
	}
	return ledgerdb.Credit{AccountID: accountID, Amount: req.Amount, Key: req.Key, Memo: req.Memo, Block: terms, Pending: req.Pending}, nil
}

// timeField reads a body's optional RFC 3339 time; nil when left out.
func timeField(field, value string) (*time.Time, error) {
	if value == "" {
		return nil, nil
	}
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return nil, badRequest("Field %q is %q; it must be an RFC 3339 time such as \"2027-01-02T00:00:00Z\"", field, clipped(value))
	}
	return &t, nil
}

// periodParams reads a statement's or a report's period from the query: from and to, each an
// RFC 3339 time or a date (2026-01-02, midnight UTC), to exclusive. A missing or unparsable one,
// or a period that holds no time, is a 400 naming it.
func periodParams(q url.Values) (from, to time.Time, err error) {
	read := func(name string) (time.Time, error) {
		value := q.Get(name)
		if value == "" {
			return time.Time{}, badRequest("Query parameter %q is needed: an RFC 3339 time or a date such as 2026-01-02", name)
		}
		t, err := ledgerdb.ParseInstant(name, value)
		var invalid *ledgerdb.InvalidInputError
		if errors.As(err, &invalid) {
			return t, badRequest("Query parameter %q %s", name, invalid.Reason)
		}
		return t, err
	}
	if from, err = read("from"); err != nil {
		return from, to, err
	}
	if to, err = read("to"); err != nil {
		return from, to, err
	}
	var invalid *ledgerdb.InvalidInputError
	if err := ledgerdb.ValidatePeriod(from, to); errors.As(err, &invalid) {
		return from, to, badRequest("The period %s", invalid.Reason)
	}
	return from, to, nil
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
