// Package apikeys is who may call jobbill's HTTP API: API keys, each with one scope, kept in the
// ledger's database and created, listed and revoked while the API runs (the admin routes under
// /v1/keys, and `jobbill key`).
//
// A key is a public ID ("key_…", shown in lists and logs) and a secret ("jb_cust_…", 256 random
// bits in base62), shown to its holder once. The database keeps only the secret's SHA-256: a fast
// hash is right for a secret with that much entropy — there is no dictionary to guess it from —
// and it makes authentication one indexed look-up of the hash of what the caller sent, whose
// time does not depend on how close a wrong secret came. The table (ledgerdb/migrations) is
// written only through two guarded functions; a revocation is final and no key row is ever
// deleted.
//
// Nothing is cached: every request's key is read from the database, so a revoked or expired key
// fails from the next request on, without a restart, on every API process.
package apikeys

import (
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/big"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Scope is what a key may do. The API's route table names the scopes each route takes.
type Scope string

const (
	// ScopeCustomer keys belong to one account: they submit, read, list and delete its jobs, and
	// read its balance, its ledger and the price list.
	ScopeCustomer Scope = "customer"
	// ScopeCustomerRead keys belong to one account and only read: its jobs, its balance, its
	// ledger and the price list.
	ScopeCustomerRead Scope = "customer_read"
	// ScopeRunner keys are the GPU service's: they may only report results, for every account's
	// jobs. The usage a result reports decides what a metered job costs, so no customer may.
	ScopeRunner Scope = "runner"
	// ScopeAdmin keys may do everything: every account, grants, prices, redrives and keys.
	ScopeAdmin Scope = "admin"
)

// Scopes are every scope.
func Scopes() []Scope {
	return []Scope{ScopeCustomer, ScopeCustomerRead, ScopeRunner, ScopeAdmin}
}

// secretPrefixes are what a secret starts with after "jb_", by scope, so that a secret found in a
// file or a log says what it opens. None holds an underscore, which separates the parts.
var secretPrefixes = map[Scope]string{ScopeCustomer: "cust", ScopeCustomerRead: "read", ScopeRunner: "run", ScopeAdmin: "admin"}

// ParseScope reads a scope by its name.
func ParseScope(name string) (Scope, error) {
	s := Scope(name)
	if _, ok := secretPrefixes[s]; !ok {
		return "", &ledgerdb.InvalidInputError{Field: "scope",
			Reason: fmt.Sprintf("is %q; it must be one of customer, customer_read, runner or admin", name)}
	}
	return s, nil
}

// OfAccount reports whether keys of the scope belong to one account (customer and
// customer_read). Runner and admin keys belong to none: they reach every account.
func (s Scope) OfAccount() bool { return s == ScopeCustomer || s == ScopeCustomerRead }

// Status says whether a key authenticates.
type Status string

const (
	// StatusActive keys authenticate.
	StatusActive Status = "active"
	// StatusExpired keys reached their expiry; they never authenticate again.
	StatusExpired Status = "expired"
	// StatusRevoked keys were revoked; they never authenticate again.
	StatusRevoked Status = "revoked"
)

// Key is what may be known of an API key: everything but its secret, which nobody keeps.
type Key struct {
	// ID is the key's public name ("key_…"), for lists, logs and revoking it.
	ID string `json:"id"`
	// Scope is what the key may do.
	Scope Scope `json:"scope"`
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
	// Status is whether the key authenticated when it was read, by the database's clock.
	Status Status `json:"status"`
}

// Created is a key just created, with its secret: the only time the secret is ever shown.
type Created struct {
	Key
	// Secret is what the key's holder sends as "Authorization: Bearer <secret>". It is not
	// stored anywhere and cannot be shown again: a lost secret means a new key.
	Secret string `json:"secret"`
}

// MaxNameLength is the longest name of a key, in characters.
const MaxNameLength = 200

// Spec is a key to create.
type Spec struct {
	// Scope is what the key may do.
	Scope Scope
	// AccountID is the key's account: required for the customer scopes, refused for the others.
	AccountID string
	// Name says who holds the key or what it is for; required, so that keys can be told apart.
	Name string
	// ExpiresAt is when the key stops authenticating; nil for never.
	ExpiresAt *time.Time
}

// Validate checks a key to create before anything reaches the database: now is the time an
// expiry must be after. Errors are [*ledgerdb.InvalidInputError]s naming the field as the API's
// body names it (scope, account_id, name, expires_at).
func (s Spec) Validate(now time.Time) error {
	if _, err := ParseScope(string(s.Scope)); err != nil {
		return err
	}
	switch {
	case s.Scope.OfAccount() && s.AccountID == "":
		return &ledgerdb.InvalidInputError{Field: "account_id", Reason: fmt.Sprintf("is required for %s keys: it names the one account the key acts for", s.Scope)}
	case !s.Scope.OfAccount() && s.AccountID != "":
		return &ledgerdb.InvalidInputError{Field: "account_id", Reason: fmt.Sprintf("must be left out for %s keys, which reach every account", s.Scope)}
	case s.AccountID != "":
		if err := ledgerdb.ValidateID("account_id", s.AccountID); err != nil {
			return err
		}
	}
	switch n := utf8.RuneCountInString(s.Name); {
	case strings.TrimSpace(s.Name) == "":
		return &ledgerdb.InvalidInputError{Field: "name", Reason: "is required: say who holds the key or what it is for"}
	case !utf8.ValidString(s.Name):
		return &ledgerdb.InvalidInputError{Field: "name", Reason: "is not valid UTF-8"}
	case n > MaxNameLength:
		return &ledgerdb.InvalidInputError{Field: "name", Reason: fmt.Sprintf("is %d characters; at most %d are allowed", n, MaxNameLength)}
	}
	// The ledger's one rule for free text: a name is shown in every list and log line, where a
	// bidirectional override or a zero-width character would make it read as another name. The
	// length is bounded in characters above, so the rule's bound in bytes is the most they take.
	if err := ledgerdb.ValidateText("name", s.Name, MaxNameLength*utf8.UTFMax); err != nil {
		return err
	}
	if s.ExpiresAt != nil && !s.ExpiresAt.After(now) {
		return &ledgerdb.InvalidInputError{Field: "expires_at", Reason: fmt.Sprintf("is %s; it must be in the future", s.ExpiresAt.UTC().Format(time.RFC3339))}
	}
	return nil
}

// keyIDPattern is the shape of a key's ID; the table's CHECK constraint repeats it.
var keyIDPattern = regexp.MustCompile(`^key_[0-9A-Za-z]{16,64}$`)

// ValidateKeyID checks a key's ID before it is looked up.
func ValidateKeyID(id string) error {
	if !keyIDPattern.MatchString(id) {
		return &ledgerdb.InvalidInputError{Field: "key ID", Reason: fmt.Sprintf("%q is not a key's ID, which is key_ and 16 to 64 letters and digits", ledgerdb.Shorten(id, 80))}
	}
	return nil
}

// Errors of authentication and look-up.
var (
	// ErrUnauthenticated means the secret is no key's, or its key expired or was revoked. The
	// API answers all of these alike (401), so that a caller learns nothing of which it was.
	ErrUnauthenticated = errors.New("no active API key has this secret")
	// ErrKeyNotFound means no key has the ID.
	ErrKeyNotFound = errors.New("no API key has this ID")
)

const (
	// secretDigits is the length of a secret's random part: 43 base62 digits hold every
	// 256-bit number (62^43 > 2^256).
	secretDigits = 43
	// idDigits is the length of an ID's random part: 22 base62 digits hold 128 bits.
	idDigits = 22
)

// base62 is n random bytes as exactly digits base62 digits (0-9a-zA-Z), zero-padded.
func base62(n, digits int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program rather than return less
	s := new(big.Int).SetBytes(b).Text(62)
	return strings.Repeat("0", digits-len(s)) + s
}

// newSecret is a fresh secret of the scope: "jb_<scope>_" and 256 random bits.
func newSecret(scope Scope) string {
	return "jb_" + secretPrefixes[scope] + "_" + base62(32, secretDigits)
}

// newID is a fresh key ID: "key_" and 128 random bits.
func newID() string { return "key_" + base62(16, idDigits) }

// hash is what the database keeps of a secret.
func hash(secret string) []byte {
	h := sha256.Sum256([]byte(secret))
	return h[:]
}
