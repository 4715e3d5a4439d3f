package api

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/ledgerdb"
)

// decodeKeyRequest reads and checks the body of POST /v1/keys into the key to create; now is the
// time expires_in counts from and expires_at must be after. Bad input is a 400 naming the field.
func decodeKeyRequest(body io.Reader, maxBytes int64, now time.Time) (apikeys.Spec, error) {
	var req apitype.KeyRequest
	if err := decodeJSON(body, maxBytes, &req, false); err != nil {
		return apikeys.Spec{}, err
	}
	spec := apikeys.Spec{Scope: apikeys.Scope(req.Scope), AccountID: req.AccountID, Name: req.Name}
	switch {
	case req.ExpiresIn != "" && req.ExpiresAt != "":
		return apikeys.Spec{}, badRequest("Give \"expires_in\" or \"expires_at\", not both")
	case req.ExpiresIn != "":
		d, err := time.ParseDuration(req.ExpiresIn)
		if err != nil || d <= 0 {
			return apikeys.Spec{}, badRequest("Field \"expires_in\" is %q; it must be a positive duration such as \"720h\" (30 days) or \"90m\"", clipped(req.ExpiresIn))
		}
		at := now.Add(d)
		spec.ExpiresAt = &at
	case req.ExpiresAt != "":
		at, err := time.Parse(time.RFC3339, req.ExpiresAt)
		if err != nil {
			return apikeys.Spec{}, badRequest("Field \"expires_at\" is %q; it must be an RFC 3339 time such as \"2030-01-31T00:00:00Z\"", clipped(req.ExpiresAt))
		}
		spec.ExpiresAt = &at
	}
	if err := spec.Validate(now); err != nil {
		return apikeys.Spec{}, keyFieldError(err)
	}
	return spec, nil
}

// keyFieldError names, in a 400, the body's field that apikeys refused: it names them as the body
// does.
func keyFieldError(err error) error {
	var invalid *ledgerdb.InvalidInputError
	if errors.As(err, &invalid) {
		return badRequest("Field %q %s", invalid.Field, invalid.Reason)
	}
	return err
}

// clipped shortens what a caller sent for an error message, between whole characters.
func clipped(s string) string { return ledgerdb.Shorten(s, 64) }

// createKey is POST /v1/keys (admin): a new key, answered with its secret this once.
func (s *Server) createKey(w http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	spec, err := decodeKeyRequest(s.body(w, r).Body, s.opts.Config.MaxBodyBytes, time.Now())
	if err != nil {
		return 0, nil, err
	}
	created, err := s.keys.Create(r.Context(), spec)
	if errors.Is(err, ledgerdb.ErrUnknownAccount) {
		// 422 as for a submission: the body is well formed, but names an account the ledger lacks.
		return 0, nil, newError(http.StatusUnprocessableEntity, "unknown_account",
			fmt.Sprintf("No account %q: open it first (jobbill account open). Nothing was written.", spec.AccountID))
	}
	if err != nil {
		return 0, nil, keyFieldError(err)
	}
	// Who made which key, for the audit trail: IDs only, never the secret.
	s.logger(r).Info("api key created", zap.String("key_id", created.ID), zap.String("scope", string(created.Scope)),
		zap.String("account", created.AccountID), zap.String("by", p.keyID))
	return http.StatusCreated, createdKeyOf(created), nil
}

// listKeys is GET /v1/keys?account_id= (admin): every key, or one account's, never a secret.
func (s *Server) listKeys(_ http.ResponseWriter, r *http.Request, _ *principal) (int, any, error) {
	keys, err := s.keys.List(r.Context(), r.URL.Query().Get("account_id"))
	if err != nil {
		return 0, nil, keyFieldError(err)
	}
	return http.StatusOK, apitype.KeyList{Keys: each(keys, keyOf)}, nil
}

// revokeKey is DELETE /v1/keys/{id} (admin): the key authenticates nothing from the next request
// on. Revoking a revoked key again answers it as it is (200): a DELETE delivered twice ends the
// same.
func (s *Server) revokeKey(_ http.ResponseWriter, r *http.Request, p *principal) (int, any, error) {
	id := r.PathValue("id")
	if err := apikeys.ValidateKeyID(id); err != nil {
		return 0, nil, err
	}
	key, outcome, err := s.keys.Revoke(r.Context(), id)
	if errors.Is(err, apikeys.ErrKeyNotFound) {
		return 0, nil, newError(http.StatusNotFound, "unknown_key", "No API key has this ID (GET /v1/keys lists them). Nothing was done.")
	}
	if err != nil {
		return 0, nil, err
	}
	if outcome == ledgerdb.Applied {
		s.logger(r).Info("api key revoked", zap.String("key_id", key.ID), zap.String("by", p.keyID))
	}
	return http.StatusOK, apitype.KeyRevoked{Outcome: string(outcome), Key: keyOf(key)}, nil
}
