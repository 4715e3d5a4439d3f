package apitype

import "time"

// KeyRequest is the body of POST /v1/keys (admin).
type KeyRequest struct {
	// Scope is customer, customer_read, runner or admin.
	Scope string `json:"scope"`
	// AccountID is the key's one account: required for customer and customer_read keys, refused
	// for runner and admin keys, which reach every account.
	AccountID string `json:"account_id,omitempty"`
	// Name says who holds the key or what it is for (1 to 200 characters).
	Name string `json:"name"`
	// ExpiresIn is how long the key works, as a duration ("720h"); or give ExpiresAt, or neither
	// for a key that does not expire.
	ExpiresIn string `json:"expires_in,omitempty"`
	// ExpiresAt is when the key stops working, an RFC 3339 time in the future. It is text so that
	// the server can refuse a malformed time naming this field.
	ExpiresAt string `json:"expires_at,omitempty"`
}

// Key is an API key as it may be known: never its secret, which is kept nowhere.
type Key struct {
	// ID is the key's public name ("key_…"), for lists, logs and revoking it.
	ID string `json:"id"`
	// Scope is what the key may do: customer, customer_read, runner or admin.
	Scope string `json:"scope"`
	// AccountID is the one account of a customer or customer_read key; empty otherwise.
	AccountID string `json:"account_id,omitempty"`
	// Name says who holds the key or what it is for.
	Name string `json:"name"`
	// CreatedAt is when the key was created.
	CreatedAt time.Time `json:"created_at"`
	// ExpiresAt is when the key stops authenticating; nil when it does not expire.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	// RevokedAt is when the key was revoked; nil while it is not.
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	// Status is active, expired or revoked: whether the key authenticated when it was read.
	Status string `json:"status"`
}

// CreatedKey is the answer of POST /v1/keys: a key just created, with its secret — the only time
// the secret is ever shown.
type CreatedKey struct {
	Key
	// Secret is what the key's holder sends as "Authorization: Bearer <secret>". It is not
	// stored anywhere and cannot be shown again: a lost secret means a new key.
	Secret string `json:"secret"`
}

// KeyList is the answer of GET /v1/keys.
type KeyList struct {
	// Keys are the keys, oldest first, with their status; never a secret.
	Keys []Key `json:"keys"`
}

// KeyRevoked is the answer of DELETE /v1/keys/{id}.
type KeyRevoked struct {
	// Outcome is applied when this request revoked the key, already_applied when it was revoked
	// before (its revoked_at is the first revocation's).
	Outcome string `json:"outcome"`
	// Key is the revoked key.
	Key Key `json:"key"`
}
