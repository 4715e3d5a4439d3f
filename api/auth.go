package api

import (
	"net/http"
	"slices"
	"strings"

	"github.com/jobbill/jobbill/apikeys"
)

// principal is who an authenticated request acts as: the API key it sent, never its secret.
type principal struct {
	// keyID names the key in logs: an API key's public ID ("key_…"), or "api.keys[i]" for a
	// bootstrap admin key of the configuration.
	keyID string
	// scope is what the key may do; the route table has already checked that it may call the
	// route.
	scope apikeys.Scope
	// account is the one account of a customer or customer_read key, which such a key acts for
	// and which is implied when a request names none; "" for runner and admin keys.
	account string
}

func newPrincipal(k apikeys.Key) *principal {
	return &principal{keyID: k.ID, scope: k.Scope, account: k.AccountID}
}

// may reports whether the principal may act for the account. A customer or customer_read key
// acts for its own account only. Runner and admin keys act for every account: the GPU service
// reports results for every customer's jobs, and the route table lets a runner key call nothing
// else.
func (p *principal) may(accountID string) bool {
	if p.scope.OfAccount() {
		return p.account == accountID
	}
	return true
}

// onlyAccount is the account a request acts for when it names none: a customer key's own; ""
// for runner and admin keys, which act for every account and so must name the account of each
// job request.
func (p *principal) onlyAccount() string { return p.account }

// access says who may call a route: anyone with no key at all (health checks, metrics), or a key
// of one of the listed scopes. The zero value is neither, and New refuses it, so that a route
// that forgot to say is never served open.
type access struct {
	public bool
	scopes []apikeys.Scope
}

// Who may call what (docs/api.md, "Keys and scopes").
var (
	// noKey routes answer without a key: they say nothing of accounts or money.
	noKey = access{public: true}
	// accountReaders read one account's jobs, balance and ledger, and the price list.
	accountReaders = access{scopes: []apikeys.Scope{apikeys.ScopeCustomer, apikeys.ScopeCustomerRead, apikeys.ScopeAdmin}}
	// accountWriters submit and delete one account's jobs.
	accountWriters = access{scopes: []apikeys.Scope{apikeys.ScopeCustomer, apikeys.ScopeAdmin}}
	// resultReporters report results. The usage a result reports decides what a metered job
	// costs, so a customer's key may not: only the GPU service's runner key, or an admin.
	resultReporters = access{scopes: []apikeys.Scope{apikeys.ScopeRunner, apikeys.ScopeAdmin}}
	// adminsOnly move money, set prices, re-drive jobs and manage keys.
	adminsOnly = access{scopes: []apikeys.Scope{apikeys.ScopeAdmin}}
)

// allows reports whether a key of the scope may call the route.
func (a access) allows(s apikeys.Scope) bool { return slices.Contains(a.scopes, s) }

// names lists the scopes for a person: "runner or admin".
func (a access) names() string {
	names := make([]string, len(a.scopes))
	for i, s := range a.scopes {
		names[i] = string(s)
	}
	if len(names) < 2 {
		return strings.Join(names, "")
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// bearer is the secret of the request's "Authorization: Bearer <secret>"; "" when it has none.
func bearer(r *http.Request) string {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(token)
}
