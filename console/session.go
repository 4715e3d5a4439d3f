package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"time"

	"github.com/jobbill/jobbill/apikeys"
)

// The cookies the console sets, out of reach of any script (see setCookie for their scope).
const (
	// sessionCookie holds the session's token (apikeys.Session).
	sessionCookie = "jobbill_session"
	// signInCookie holds the sign-in form's CSRF token, before there is a session to derive one
	// from: the form must send back what the cookie holds (a double submit).
	signInCookie = "jobbill_sign_in"
	// cookiePath is where the browser sends them over plain HTTP: the console's pages only.
	cookiePath = "/console/"
	// hostPrefix names the cookies behind TLS: a browser takes a __Host- cookie only when it is
	// Secure, on the path /, for no Domain, so no other host of the domain and no plain-HTTP page
	// can set or shadow it. The price is the path: the API's paths receive it too, and ignore it
	// (the API authenticates by key only).
	hostPrefix = "__Host-"
)

// csrfField is the hidden field every form of the console carries.
const csrfField = "csrf"

// viewer is who a request's session acts as: the session's key, and the CSRF token its forms
// carry.
type viewer struct {
	key   apikeys.Key
	token string
}

// admin reports whether the viewer is an operator, who may read every account.
func (v *viewer) admin() bool { return v != nil && v.key.Scope == apikeys.ScopeAdmin }

// may reports whether the viewer may read the account: an operator every one, a customer its own.
func (v *viewer) may(accountID string) bool {
	if v == nil {
		return false
	}
	return v.admin() || (v.key.Scope.OfAccount() && v.key.AccountID == accountID)
}

// csrf is the token the session's forms carry: derived from the session's token, which only the
// signed-in browser holds (its cookie is HttpOnly), so a page of another site cannot know it, and
// nothing more needs storing.
func (v *viewer) csrf() string { return csrfOf(v.token) }

func csrfOf(token string) string {
	sum := sha256.Sum256([]byte("jobbill console form\x00" + token))
	return base64.RawURLEncoding.EncodeToString(sum[:])
}

// sameToken compares a form's token to the expected one in constant time; an empty one never
// matches.
func sameToken(got, want string) bool {
	return got != "" && want != "" && subtle.ConstantTimeCompare([]byte(got), []byte(want)) == 1
}

// randomToken is 256 random bits, base64url.
func randomToken() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}

// secure reports whether the request reached the console over TLS, directly or through a proxy
// that says so: only then are the cookies marked Secure (a browser would drop them over plain
// HTTP, which a development listener serves).
func secure(r *http.Request) bool {
	return r.TLS != nil || r.Header.Get("X-Forwarded-Proto") == "https"
}

// cookieName is the name a cookie of the console has on the request's connection: with the
// __Host- prefix behind TLS.
func cookieName(r *http.Request, name string) string {
	if secure(r) {
		return hostPrefix + name
	}
	return name
}

// setCookie sets one of the console's cookies: HttpOnly, SameSite=Strict; on the console's path
// over plain HTTP, and behind TLS Secure, __Host- prefixed, on /. A zero expiry makes a
// browser-session cookie; a past one removes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, expires time.Time) {
	c := &http.Cookie{Name: cookieName(r, name), Value: value, Path: cookiePath, HttpOnly: true,
		SameSite: http.SameSiteStrictMode}
	if secure(r) {
		c.Secure, c.Path = true, "/"
	}
	if !expires.IsZero() {
		c.Expires = expires
		if !expires.After(time.Now()) {
			c.MaxAge = -1
		}
	}
	http.SetCookie(w, c)
}

// cookie is the value of the request's cookie of the name (prefixed behind TLS, as setCookie
// names it); "" when it has none.
func cookie(r *http.Request, name string) string {
	c, err := r.Cookie(cookieName(r, name))
	if err != nil {
		return ""
	}
	return c.Value
}
