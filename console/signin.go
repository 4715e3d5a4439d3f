package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/jobbill/jobbill/apikeys"
)

// maxFormBytes bounds a form's body: the longest field any form takes is a note of a few
// kilobytes.
const maxFormBytes = 16 << 10

// signInData is the sign-in page's.
type signInData struct {
	// Problem says why the last try did not sign in; "" on a first visit.
	Problem string
}

// signInForm is the sign-in page. Its form's CSRF token is a fresh random one, held in a cookie
// of its own until there is a session to derive tokens from.
func (c *Console) signInForm(w http.ResponseWriter, r *http.Request) {
	if v := c.viewerOf(w, r); v != nil {
		http.Redirect(w, r, "/console/", http.StatusSeeOther)
		return
	}
	c.showSignIn(w, r, http.StatusOK, "")
}

func (c *Console) showSignIn(w http.ResponseWriter, r *http.Request, status int, problem string) {
	token := randomToken()
	setCookie(w, r, signInCookie, token, timeZero)
	c.renderWith(w, r, status, "signin", nil, "Sign in", token, signInData{Problem: problem})
}

// keyRefused answers a key that opens no session — unknown, expired, revoked, or one of the
// configuration's bootstrap keys, which no revocation could end a session of — in words for whoever
// holds a key, a customer most often: what to check, and whom to ask. (An operator's own keys are
// made with `jobbill key create --scope admin`, which docs/console.md says.)
const keyRefused = "That key does not open the console: it is not a key of this system, or it has expired or been " +
	"revoked. Check that you pasted all of it, or ask whoever gave it to you for a new one."

// signIn turns a pasted key into a session: the key is read from the form's body once, checked,
// and never kept — the browser gets the session's token instead. Every refusal writes nothing.
func (c *Console) signIn(w http.ResponseWriter, r *http.Request) {
	if !readForm(w, r) {
		c.showSignIn(w, r, http.StatusBadRequest, "The form could not be read. Paste the key again.")
		return
	}
	if !sameToken(r.PostFormValue(csrfField), cookie(r, signInCookie)) {
		c.refuseForm(w, r, nil)
		return
	}
	secret := strings.TrimSpace(r.PostFormValue("key"))
	if secret == "" {
		c.showSignIn(w, r, http.StatusBadRequest, "Paste an API key to sign in.")
		return
	}
	key, err := c.keys.Authenticate(r.Context(), secret)
	switch {
	case errors.Is(err, apikeys.ErrUnauthenticated):
		c.openedNothing(r)
		c.showSignIn(w, r, http.StatusUnauthorized, keyRefused)
		return
	case err != nil:
		c.fail(w, r, nil, err)
		return
	case key.Scope == apikeys.ScopeRunner:
		c.showSignIn(w, r, http.StatusForbidden, "A runner key only reports results; it cannot open the console. Sign in with a customer, customer_read or admin key.")
		return
	}
	session, err := c.keys.OpenSession(r.Context(), secret, c.opts.SessionLifetime)
	if errors.Is(err, apikeys.ErrUnauthenticated) {
		// Revoked between the two reads.
		c.showSignIn(w, r, http.StatusUnauthorized, keyRefused)
		return
	}
	if err != nil {
		c.fail(w, r, nil, err)
		return
	}
	// Signing in over a session ends it: a browser holds one session, and the token it replaces
	// (perhaps another key's, perhaps copied) opens nothing any more.
	if err := c.keys.EndSession(r.Context(), cookie(r, sessionCookie)); err != nil {
		c.fail(w, r, nil, err)
		return
	}
	setCookie(w, r, signInCookie, "", timePast)
	setCookie(w, r, sessionCookie, session.Token, session.ExpiresAt)
	http.Redirect(w, r, "/console/", http.StatusSeeOther)
}

// signOut ends the session: its token opens nothing from now on, in this browser or any copy.
func (c *Console) signOut(w http.ResponseWriter, r *http.Request, v *viewer) error {
	if err := c.keys.EndSession(r.Context(), v.token); err != nil {
		return err
	}
	setCookie(w, r, sessionCookie, "", timePast)
	http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
	return nil
}

// home sends each viewer to where they start: a stranger to sign in, a customer to their
// account, an operator to the operator's page.
func (c *Console) home(w http.ResponseWriter, r *http.Request, v *viewer) error {
	switch {
	case v == nil:
		http.Redirect(w, r, "/console/sign-in", http.StatusSeeOther)
	case v.admin():
		http.Redirect(w, r, "/console/operator/", http.StatusSeeOther)
	default:
		http.Redirect(w, r, accountPath(v.key.AccountID), http.StatusSeeOther)
	}
	return nil
}
