package api

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"

	"github.com/jobbill/jobbill/config"
)

// principal is who an authenticated request acts as. It never holds the secret: index names the
// key in logs.
type principal struct {
	index    int
	admin    bool
	accounts map[string]bool
}

// may reports whether the principal may act for the account.
func (p *principal) may(accountID string) bool { return p.admin || p.accounts[accountID] }

// onlyAccount is the one account a key of a single account acts for; "" for an admin key or a
// key of several accounts, which must name the account of each job request.
func (p *principal) onlyAccount() string {
	if p.admin || len(p.accounts) != 1 {
		return ""
	}
	for a := range p.accounts {
		return a
	}
	return ""
}

// keyring checks bearer keys in constant time.
type keyring struct {
	// digests are the SHA-256 of each secret: comparing fixed-length digests keeps the
	// comparison's time independent of the secrets' lengths too.
	digests    [][sha256.Size]byte
	principals []*principal
}

func newKeyring(keys []config.APIKey) *keyring {
	kr := &keyring{}
	for i, k := range keys {
		p := &principal{index: i, admin: k.Admin, accounts: map[string]bool{}}
		for _, a := range k.Accounts {
			p.accounts[a] = true
		}
		kr.digests = append(kr.digests, sha256.Sum256([]byte(k.Key)))
		kr.principals = append(kr.principals, p)
	}
	return kr
}

// authenticate finds the key of a request. Every configured key is compared, with no early exit,
// so the time taken does not tell which key (or how many) came close.
func (kr *keyring) authenticate(r *http.Request) (*principal, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return nil, false
	}
	digest := sha256.Sum256([]byte(strings.TrimSpace(token)))
	match := -1
	for i := range kr.digests {
		eq := subtle.ConstantTimeCompare(digest[:], kr.digests[i][:])
		match = subtle.ConstantTimeSelect(eq, i, match)
	}
	if match < 0 {
		return nil, false
	}
	return kr.principals[match], true
}
