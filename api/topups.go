package api

import (
	"errors"
	"net/http"

	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
)

// CodeGrantExpired is the error code of a pending grant whose payment was confirmed after its
// expiry: the grant was voided, no credits added.
const CodeGrantExpired = "grant_expired"

// msgGrantExpired says what became of a grant whose payment was confirmed after its expiry.
const msgGrantExpired = "This grant's expiry passed before its payment was confirmed, so the grant was voided: " +
	"no credits were added, and none will be. Refund the payment; confirming it again answers the same."

// settleGrant is POST /v1/accounts/{id}/grants/{key}/settle (admin): the payment of a grant posted
// pending was made ({"paid": true}: its credits become spendable, its row written) or failed
// ({"paid": false}: its block is void). Settling it again the same way answers already_applied;
// the other way, 409 conflict. A payment confirmed after the grant's expiry voids it instead: 409
// grant_expired, then and to every retry (its credits could only have lapsed).
func (s *Server) settleGrant(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	key := r.PathValue("key")
	if err := ledgerdb.ValidateID("key", key); err != nil {
		return 0, nil, err
	}
	var req apitype.SettleGrantRequest
	if err := decodeJSON(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, &req, false); err != nil {
		return 0, nil, err
	}
	if req.Paid == nil {
		return 0, nil, badRequest("The body must be {\"paid\": true} (the payment was made) or {\"paid\": false} (it failed)")
	}
	posting, err := s.opts.Ledger.SettlePendingGrant(r.Context(), id, key, *req.Paid)
	switch {
	case errors.Is(err, ledgerdb.ErrUnknownGrant):
		return 0, nil, newError(http.StatusNotFound, "not_found", "No grant was posted to this account with this key.")
	case errors.Is(err, ledgerdb.ErrConflict):
		return 0, nil, newError(http.StatusConflict, "conflict", "This grant's payment was settled the other way before; nothing changed.")
	case errors.Is(err, ledgerdb.ErrGrantExpired):
		return 0, nil, newError(http.StatusConflict, CodeGrantExpired, msgGrantExpired)
	case err != nil:
		return 0, nil, err
	}
	return http.StatusOK, apitype.Grant{AccountID: id, Outcome: string(posting.Outcome), EntryID: posting.EntryID,
		BalanceAfter: posting.BalanceAfter}, nil
}

// getTopUpRule is GET /v1/accounts/{id}/topup-rule: the account's automatic top-up rule; 404
// when it has none.
func (s *Server) getTopUpRule(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	if _, err := s.opts.Ledger.Balance(r.Context(), id); err != nil {
		return 0, nil, err
	}
	rule, ok, err := s.opts.Ledger.TopUpRuleOf(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	if !ok {
		return 0, nil, newError(http.StatusNotFound, "not_found", "This account has no automatic top-up rule.")
	}
	return http.StatusOK, topUpRuleOf(rule, ""), nil
}

// setTopUpRule is PUT /v1/accounts/{id}/topup-rule (admin): sets the account's automatic top-up
// rule, replacing any. A rule the ledger would refuse is a 400 naming the field, nothing written.
func (s *Server) setTopUpRule(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	var req apitype.TopUpRule
	if err := decodeJSON(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, &req, false); err != nil {
		return 0, nil, err
	}
	rule := ledgerdb.TopUpRule{AccountID: id, Threshold: req.Threshold, Mode: ledgerdb.TopUpMode(req.Mode), Amount: req.Amount, MonthlyCap: req.MonthlyCap}
	var invalid *ledgerdb.InvalidInputError
	if err := rule.Validate(); errors.As(err, &invalid) {
		return 0, nil, badRequest("Field %q %s", invalid.Field, invalid.Reason)
	}
	outcome, err := s.opts.Ledger.SetTopUpRule(r.Context(), rule)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, topUpRuleOf(rule, outcome), nil
}

// removeTopUpRule is DELETE /v1/accounts/{id}/topup-rule (admin); already_applied when there was
// none. It answers the outcome, as every idempotent door does, and no rule: a TopUpRule of the
// zero values would be one its own schema refuses (mode "", amount 0), which a client that
// validates answers would fail on, and one that does not would read as a rule.
func (s *Server) removeTopUpRule(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id, err := ownAccount(r, p)
	if err != nil {
		return 0, nil, err
	}
	outcome, err := s.opts.Ledger.RemoveTopUpRule(r.Context(), id)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, apitype.TopUpRuleRemoved{AccountID: id, Outcome: string(outcome)}, nil
}
