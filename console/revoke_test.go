package console_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestRevokeAsksFirst checks that revoking a key, which is final, takes a second, deliberate step:
// the keys page links each active key to a page that says what revoking does and asks for a
// ticked confirmation; a revocation posted without it — as the keys page's old one-click form
// sent it — is refused (400) and the key stays active, its sessions open. Confirmed, the key is
// revoked, the keys page says so once, and a second confirmation changes nothing and says that.
func TestRevokeAsksFirst(t *testing.T) {
	s := serve(t)
	acct := ledgertest.Account(t, s.Store, 100)
	cust, customerKey := s.signedIn(t, apikeys.ScopeCustomer, acct)
	op, _ := s.signedIn(t, apikeys.ScopeAdmin, "")
	confirmPath := "/console/operator/keys/" + customerKey.ID + "/revoke"

	keys := get(t, op, s.URL+"/console/operator/keys")
	require.Contains(t, keys.body, `href="`+confirmPath+`"`, "the keys page links to the confirmation")
	require.NotContains(t, keys.body, `action="`+confirmPath+`"`, "the keys page revokes nothing by itself")

	unconfirmed := post(t, op, s.URL+confirmPath, url.Values{"csrf": {csrf(t, keys)}})
	require.Equal(t, http.StatusBadRequest, unconfirmed.code, unconfirmed.body)
	require.Contains(t, unconfirmed.body, "Tick the box to confirm that revoking is final. Nothing was changed.")
	require.Equal(t, apikeys.StatusActive, keyStatus(t, s, customerKey.ID))
	require.Equal(t, http.StatusOK, get(t, cust, s.URL+"/console/accounts/"+acct).code, "its session stays open")

	confirm := get(t, op, s.URL+confirmPath)
	require.Equal(t, http.StatusOK, confirm.code)
	require.Contains(t, confirm.body, "<h1>Revoke key "+customerKey.ID+"?</h1>")
	require.Contains(t, confirm.body, "It cannot be undone")
	require.Regexp(t, `<input type="checkbox" id="confirm" name="confirm" value="yes" required>`, confirm.body)

	done := post(t, op, s.URL+confirmPath, url.Values{"csrf": {csrf(t, confirm)}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, done.code, done.body)
	require.Equal(t, "/console/operator/keys", done.resp.Header.Get("Location"))
	require.Equal(t, apikeys.StatusRevoked, keyStatus(t, s, customerKey.ID))
	listed := get(t, op, s.URL+"/console/operator/keys")
	require.Contains(t, listed.body, `<p class="notice" role="status">Key `+customerKey.ID+` is revoked`)
	require.NotContains(t, get(t, op, s.URL+"/console/operator/keys").body, "is revoked:", "a notice is shown once")
	require.Equal(t, http.StatusSeeOther, get(t, cust, s.URL+"/console/accounts/"+acct).code, "its session ended")

	again := post(t, op, s.URL+confirmPath, url.Values{"csrf": {csrf(t, confirm)}, "confirm": {"yes"}})
	require.Equal(t, http.StatusSeeOther, again.code)
	require.Contains(t, get(t, op, s.URL+"/console/operator/keys").body, "Key "+customerKey.ID+" was revoked already. Nothing was changed.")
	gone := get(t, op, s.URL+confirmPath)
	require.Equal(t, http.StatusOK, gone.code)
	require.Contains(t, gone.body, "nothing to revoke")
	require.NotContains(t, gone.body, `name="confirm"`)
}

// keyStatus is the status of the key with the ID.
func keyStatus(t *testing.T, s *site, id string) apikeys.Status {
	t.Helper()
	keys, err := apikeys.NewStore(s.Store.Pool()).List(context.Background(), "")
	require.NoError(t, err)
	for _, k := range keys {
		if k.ID == id {
			return k.Status
		}
	}
	t.Fatalf("no key %s", id)
	return ""
}
