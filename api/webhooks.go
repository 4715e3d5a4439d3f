package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"time"

	"go.uber.org/zap"

	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
)

// hookEndpoint is the {endpoint} of a path, checked, after the account of the path.
func hookEndpoint(r *http.Request, p *principal) (account, endpoint string, err error) {
	account, err = ownAccount(r, p)
	if err != nil {
		return "", "", err
	}
	endpoint = r.PathValue("endpoint")
	if err := webhooks.ValidateEndpointID(endpoint); err != nil {
		return "", "", err
	}
	return account, endpoint, nil
}

// hookError maps the webhook store's refusals to answers; nothing was written for any of them.
func hookError(err error) error {
	switch {
	case errors.Is(err, webhooks.ErrEndpointNotFound):
		return newError(http.StatusNotFound, "unknown_endpoint", "The account has no webhook endpoint with this ID (GET /v1/accounts/{id}/webhooks lists them). Nothing was done.")
	case errors.Is(err, webhooks.ErrEndpointDisabled):
		return newError(http.StatusConflict, "endpoint_deleted", "This webhook endpoint was deleted; create a new one. Nothing was done.")
	case errors.Is(err, webhooks.ErrUnknownEvent):
		return newError(http.StatusNotFound, "unknown_event", "The account has no event with this ID (the delivery log names them). Nothing was queued.")
	case errors.Is(err, webhooks.ErrTooManyEndpoints):
		return newError(http.StatusUnprocessableEntity, "too_many_endpoints", fmt.Sprintf(
			"The account already has %d webhook endpoints; delete one first. Nothing was written.", webhooks.MaxEndpoints))
	}
	return fieldError(err, fieldOf(err))
}

// fieldOf is the name of the field a bad-input error is about, as the body names it.
func fieldOf(err error) string {
	var invalid *ledgerdb.InvalidInputError
	if errors.As(err, &invalid) {
		return invalid.Field
	}
	return ""
}

// createEndpoint is POST /v1/accounts/{id}/webhooks: a new endpoint, answered with its secret this
// once.
func (s *Server) createEndpoint(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	account, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req apitype.EndpointRequest
	if err := decodeJSON(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, &req, false); err != nil {
		return 0, nil, err
	}
	created, err := s.hooks.CreateEndpoint(r.Context(), webhooks.EndpointSpec{AccountID: account, URL: req.URL, Description: req.Description},
		s.opts.WebhookURLs)
	if err != nil {
		return 0, nil, hookError(err)
	}
	s.logger(r).Info("webhook endpoint created", zap.String("endpoint", created.ID), zap.String("account", account), zap.String("by", p.keyID))
	return http.StatusCreated, endpointCreatedOf(created), nil
}

// listEndpoints is GET /v1/accounts/{id}/webhooks.
func (s *Server) listEndpoints(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	account, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	eps, err := s.hooks.Endpoints(r.Context(), account)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, apitype.EndpointList{Endpoints: each(eps, endpointOf)}, nil
}

// getEndpoint is GET /v1/accounts/{id}/webhooks/{endpoint}.
func (s *Server) getEndpoint(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	account, id, err := hookEndpoint(r, p)
	if err != nil {
		return 0, nil, err
	}
	ep, err := s.hooks.Endpoint(r.Context(), account, id)
	if err != nil {
		return 0, nil, hookError(err)
	}
	return http.StatusOK, endpointOf(ep), nil
}

// deleteEndpoint is DELETE /v1/accounts/{id}/webhooks/{endpoint}: the endpoint receives nothing
// more. Deleting it again answers it as it is (200).
func (s *Server) deleteEndpoint(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	account, id, err := hookEndpoint(r, p)
	if err != nil {
		return 0, nil, err
	}
	ep, outcome, err := s.hooks.DeleteEndpoint(r.Context(), account, id)
	if err != nil {
		return 0, nil, hookError(err)
	}
	if outcome == ledgerdb.Applied {
		s.logger(r).Info("webhook endpoint deleted", zap.String("endpoint", id), zap.String("by", p.keyID))
	}
	return http.StatusOK, apitype.EndpointDeleted{Outcome: string(outcome), Endpoint: endpointOf(ep)}, nil
}

// rotateSecret is POST /v1/accounts/{id}/webhooks/{endpoint}/rotate: a new signing secret,
// answered this once; the old one signs nothing more.
func (s *Server) rotateSecret(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	account, id, err := hookEndpoint(r, p)
	if err != nil {
		return 0, nil, err
	}
	created, err := s.hooks.RotateSecret(r.Context(), account, id)
	if err != nil {
		return 0, nil, hookError(err)
	}
	s.logger(r).Info("webhook secret rotated", zap.String("endpoint", id), zap.String("by", p.keyID))
	return http.StatusOK, endpointCreatedOf(created), nil
}

// listAttempts is GET /v1/accounts/{id}/webhooks/{endpoint}/attempts?before=&limit=: the delivery
// log, newest first.
func (s *Server) listAttempts(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	account, id, err := hookEndpoint(r, p)
	if err != nil {
		return 0, nil, err
	}
	q := r.URL.Query()
	before, limit := int64(0), 100
	if v := q.Get("before"); v != "" {
		if before, err = strconv.ParseInt(v, 10, 64); err != nil || before < 0 {
			return 0, nil, badRequest("Query parameter \"before\" must be a delivery log ID (a whole number, 0 or more)")
		}
	}
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil || limit < 1 || limit > 1000 {
			return 0, nil, badRequest("Query parameter \"limit\" must be a whole number from 1 to 1000")
		}
	}
	log, err := s.hooks.Attempts(r.Context(), account, id, before, limit)
	if err != nil {
		return 0, nil, hookError(err)
	}
	out := apitype.AttemptLog{Attempts: each(log, attemptOf)}
	if len(log) == limit {
		out.NextBefore = log[len(log)-1].ID
	}
	return http.StatusOK, out, nil
}

// decodeReplay reads the body of a replay: event_id or since, exactly one.
func decodeReplay(body io.Reader, maxBytes int64) (webhooks.Replay, error) {
	var req apitype.ReplayRequest
	if err := decodeJSON(body, maxBytes, &req, false); err != nil {
		return webhooks.Replay{}, err
	}
	switch {
	case (req.EventID == "") == (req.Since == ""):
		return webhooks.Replay{}, badRequest("Give \"event_id\" (one event) or \"since\" (every event from a time), exactly one of them")
	case req.EventID != "":
		if err := webhooks.ValidateEventID(req.EventID); err != nil {
			return webhooks.Replay{}, fieldError(err, "event_id")
		}
		return webhooks.Replay{EventID: req.EventID}, nil
	}
	since, err := time.Parse(time.RFC3339, req.Since)
	if err != nil {
		return webhooks.Replay{}, badRequest("Field \"since\" is %q; it must be an RFC 3339 time such as \"2030-01-31T00:00:00Z\"", clipped(req.Since))
	}
	return webhooks.Replay{Since: &since}, nil
}

// replay is POST /v1/accounts/{id}/webhooks/{endpoint}/replay: send one event, or every event since
// a time, to the endpoint again, under their own webhook-ids.
func (s *Server) replay(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	account, id, err := hookEndpoint(r, p)
	if err != nil {
		return 0, nil, err
	}
	req, err := decodeReplay(s.body(w, r).Body, s.opts.Config.MaxBodyBytes)
	if err != nil {
		return 0, nil, err
	}
	n, err := s.hooks.Replay(r.Context(), account, id, req)
	if err != nil {
		return 0, nil, hookError(err)
	}
	s.logger(r).Info("webhook events replayed", zap.String("endpoint", id), zap.Int("queued", n), zap.String("by", p.keyID))
	return http.StatusAccepted, apitype.Replayed{Queued: n}, nil
}

// setThreshold is PUT /v1/accounts/{id}/low-balance-threshold.
func (s *Server) setThreshold(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	account, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	data, err := readBody(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, false)
	if err != nil {
		return 0, nil, err
	}
	if keys, _ := objectKeys(data); len(keys) != 1 || keys[0] != "threshold" {
		return 0, nil, badRequest("The body must be {\"threshold\": <credits>}, or {\"threshold\": null} to remove it")
	}
	var req apitype.ThresholdRequest
	if err := decodeObject(data, &req, nil); err != nil {
		return 0, nil, err
	}
	outcome, err := s.hooks.SetLowBalanceThreshold(r.Context(), account, req.Threshold)
	if err != nil {
		return 0, nil, hookError(err)
	}
	return http.StatusOK, apitype.Threshold{AccountID: account, Outcome: string(outcome), Threshold: req.Threshold}, nil
}
