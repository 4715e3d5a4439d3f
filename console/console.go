package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.temporal.io/api/serviceerror"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/api"
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/plural"
	"github.com/jobbill/jobbill/webhooks"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// DefaultSessionLifetime is how long a session lasts when Options names no lifetime: a working
// day. A key's own expiry, when sooner, ends it first.
const DefaultSessionLifetime = 12 * time.Hour

// Options configures a [Console].
type Options struct {
	// Jobs reads, lists and re-drives jobs (the job service the API uses).
	Jobs *jobs.Service
	// Ledger reads accounts, rows, statements, prices and alarms, and keeps the API keys and the
	// console's sessions; the webhook deliveries of a job are read from its database too.
	Ledger *ledgerdb.Store
	// SessionLifetime is how long a session lasts; DefaultSessionLifetime when zero.
	SessionLifetime time.Duration
	// RequestTimeout bounds each page's work; 20 seconds when zero.
	RequestTimeout time.Duration
	// Logger logs one line per page served (never a key, a token or a form); nothing when nil.
	Logger *zap.Logger
	// SessionRate limits each signed-in browser's pages; AddressRate the requests of each remote
	// address that carry no session, or a session or key that opens nothing. A zero rate
	// limits nothing.
	SessionRate, AddressRate config.RateLimit
}

// Console serves the console's pages. It is an http.Handler for the paths under /console/, safe
// for concurrent use.
type Console struct {
	opts  Options
	keys  *apikeys.Store
	hooks *webhooks.Store
	pages map[string]*template.Template
	mux   *http.ServeMux
	// bySession counts each session's requests; byAddress each remote address's requests that
	// carry no session, or a session or key that opens nothing (see admit).
	bySession, byAddress *api.Limiter
}

// contentSecurityPolicy allows the console's own stylesheet, images and forms, and nothing else:
// no script of any origin (the console sends none), no frame, no plugin, no other site's form
// target. SVG drawn into a page is markup, which it allows.
const contentSecurityPolicy = "default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; " +
	"frame-ancestors 'none'; base-uri 'none'"

// New builds the console from opts.
func New(opts Options) *Console {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.SessionLifetime <= 0 {
		opts.SessionLifetime = DefaultSessionLifetime
	}
	if opts.RequestTimeout <= 0 {
		opts.RequestTimeout = 20 * time.Second
	}
	c := &Console{opts: opts, keys: apikeys.NewStore(opts.Ledger.Pool()),
		hooks: webhooks.NewStore(opts.Ledger.Pool()), pages: parsePages(),
		bySession: api.NewLimiter(opts.SessionRate), byAddress: api.NewLimiter(opts.AddressRate)}
	static, err := fs.Sub(staticFiles, "static")
	if err != nil {
		panic(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc(staticPrefix, c.serveStatic(static))
	mux.HandleFunc("GET /console/{$}", c.page(c.home, anyone))
	mux.HandleFunc("GET /console/sign-in", c.signInForm)
	mux.HandleFunc("POST /console/sign-in", c.signIn)
	mux.HandleFunc("POST /console/sign-out", c.page(c.signOut, signedIn))
	mux.HandleFunc("GET /console/accounts/{account}", c.page(c.account, signedIn))
	mux.HandleFunc("GET /console/accounts/{account}/jobs", c.page(c.jobList, signedIn))
	mux.HandleFunc("GET /console/accounts/{account}/jobs/{job}", c.page(c.job, signedIn))
	mux.HandleFunc("GET /console/accounts/{account}/statement.csv", c.page(c.statement, signedIn))
	mux.HandleFunc("POST /console/accounts/{account}/jobs/{job}/redrive", c.page(c.redrive, operators))
	mux.HandleFunc("GET /console/operator/{$}", c.page(c.operatorHome, operators))
	mux.HandleFunc("GET /console/operator/account", c.page(c.findAccount, operators))
	mux.HandleFunc("GET /console/operator/dead-letters", c.page(c.deadLetters, operators))
	mux.HandleFunc("GET /console/operator/alarms", c.page(c.alarms, operators))
	mux.HandleFunc("GET /console/operator/prices", c.page(c.prices, operators))
	mux.HandleFunc("GET /console/operator/prices/{kind}", c.page(c.priceHistory, operators))
	mux.HandleFunc("GET /console/operator/keys", c.page(c.keyList, operators))
	mux.HandleFunc("GET /console/operator/keys/{key}/revoke", c.page(c.revokeForm, operators))
	mux.HandleFunc("POST /console/operator/keys/{key}/revoke", c.page(c.revokeKey, operators))
	// Every other path and method: 405 when the path takes another method, else 404.
	mux.HandleFunc("/console/", c.noRoute)
	c.mux = mux
	return c
}

// noRoute answers a request no route takes: 405, with Allow, when its path takes other methods
// (the answer depends on the path alone, never on an account), else the not-found page.
func (c *Console) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		probe := r.Clone(r.Context())
		probe.Method = method
		if _, pattern := c.mux.Handler(probe); pattern != "/console/" {
			allow = append(allow, method)
			if method == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	if len(allow) == 0 {
		c.render(w, r, http.StatusNotFound, "notfound", c.viewerOf(w, r), "Not found", nil)
		return
	}
	c.notAllowed(w, r, c.viewerOf(w, r), allow...)
}

// notAllowed answers a method the path does not take: 405, with Allow.
func (c *Console) notAllowed(w http.ResponseWriter, r *http.Request, v *viewer, allow ...string) {
	w.Header().Set("Allow", strings.Join(allow, ", "))
	msg := "This page does not take what was sent to it. Nothing was done."
	if !slices.Contains(allow, http.MethodGet) {
		msg = "This address takes the console's forms only; it is not a page to open. Nothing was done."
	}
	c.render(w, r, http.StatusMethodNotAllowed, "error", v, "Not allowed", msg)
}

// serveStatic serves the stylesheet and the icon, one file at a time: a directory, or a name it
// does not have, is the not-found page (without the menu, so that nothing is looked up for a
// request the limit did not count).
func (c *Console) serveStatic(static fs.FS) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			c.notAllowed(w, r, nil, http.MethodGet, http.MethodHead)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, staticPrefix)
		if info, err := fs.Stat(static, name); err != nil || !info.Mode().IsRegular() || strings.Contains(name, "/") {
			c.render(w, r, http.StatusNotFound, "notfound", nil, "Not found", nil)
			return
		}
		http.ServeFileFS(w, r, static, name)
	}
}

// ServeHTTP serves a console page, with the headers every page carries.
func (c *Console) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	// Pages about money are never cached: a shared machine's back button must not show them.
	h.Set("Cache-Control", "no-store")
	if !strings.HasPrefix(r.URL.Path, staticPrefix) {
		// A page view counts once: the stylesheet and the icon it loads are not counted.
		if ok, wait := c.admit(r, time.Now()); !ok {
			c.tooMany(w, r, wait)
			return
		}
	}
	c.mux.ServeHTTP(w, r)
}

// staticPrefix is where the stylesheet and the icon are served from.
const staticPrefix = "/console/static/"

// admit counts a request against its limit, before anything is looked up, and says whether it may
// go on; when not, how long until it may. A request with a session cookie counts against that
// session — whoever else shares its address, behind a proxy — and one without (the sign-in form
// and its posts) against its remote address, the only thing to count it by. Since a cookie could
// be made up to get a full bucket of its own, each that opens nothing counts against its address
// too (openedNothing), and an address that has spent its bucket so is refused before its next
// cookie is looked up.
func (c *Console) admit(r *http.Request, now time.Time) (bool, time.Duration) {
	address := addressName(r)
	token := cookie(r, sessionCookie)
	if token == "" {
		return c.byAddress.Take(address, now)
	}
	if ok, wait := c.byAddress.Peek(address, now); !ok {
		return false, wait
	}
	return c.bySession.Take("session\x00"+token, now)
}

// openedNothing counts a request whose session cookie or pasted key opened nothing against its
// address: a request without a session cookie was counted there already.
func (c *Console) openedNothing(r *http.Request) {
	if cookie(r, sessionCookie) != "" {
		c.byAddress.Take(addressName(r), time.Now())
	}
}

func addressName(r *http.Request) string { return "address\x00" + api.RemoteHost(r) }

// tooMany answers a request past its limit: the console's page, 429, saying in words when to
// come back, with Retry-After. Nothing was looked up, so the page has no menu.
func (c *Console) tooMany(w http.ResponseWriter, r *http.Request, wait time.Duration) {
	seconds := max(1, int(math.Ceil(wait.Seconds())))
	w.Header().Set("Retry-After", strconv.Itoa(seconds))
	who := "You opened pages faster than the console serves one person."
	if cookie(r, sessionCookie) == "" {
		who = "Too many requests without a signed-in session came from your network at once."
	}
	c.render(w, r, http.StatusTooManyRequests, "error", nil, "Too many requests",
		fmt.Sprintf("%s Nothing was done: try again in %s.", who, waitWords(seconds)))
	// Refused before its route was looked up: the log names the limit, never the path.
	c.opts.Logger.Info("console page", zap.String("route", "(rate limit)"), zap.Int("status", http.StatusTooManyRequests))
}

// Who may open a page.
type audience int

const (
	// anyone: the page decides (the home page sends a stranger to sign in).
	anyone audience = iota
	// signedIn: any session; the page checks which account it may read.
	signedIn
	// operators: an admin key's session; anyone else gets the not-found page.
	operators
)

// handler does a page's work for a viewer (nil when nobody is signed in).
type handler func(w http.ResponseWriter, r *http.Request, v *viewer) error

// page wraps a handler: the session, who may open it, the CSRF token of a POST, a bounded
// context, the answer to an error, and a log line.
func (c *Console) page(h handler, who audience) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		base := r.Context()
		if r.Method != http.MethodGet {
			// A form's work finishes when its browser goes away: each step is idempotent anyway.
			base = context.WithoutCancel(base)
		}
		ctx, cancel := context.WithTimeout(base, c.opts.RequestTimeout)
		defer cancel()
		r = r.WithContext(ctx)
		rec := &statusWriter{ResponseWriter: w}
		v, err := c.session(rec, r)
		switch {
		case err != nil:
			c.opts.Logger.Warn("console session check failed", zap.Error(err))
			rec.Header().Set("Retry-After", retryAfterUnavailable)
			c.render(rec, r, http.StatusServiceUnavailable, "error", nil, "Unavailable",
				"The console cannot check your session right now; nothing was done. Try again in a moment.")
		case v == nil && who != anyone:
			http.Redirect(rec, r, "/console/sign-in", http.StatusSeeOther)
		case who == operators && !v.admin():
			c.render(rec, r, http.StatusNotFound, "notfound", v, "Not found", nil)
		case r.Method == http.MethodPost && !readForm(rec, r):
			c.render(rec, r, http.StatusBadRequest, "error", v, "Not done", "The form could not be read. Nothing was changed.")
		case r.Method == http.MethodPost && !sameToken(r.PostFormValue(csrfField), v.csrf()):
			c.refuseForm(rec, r, v)
		default:
			if err := h(rec, r, v); err != nil {
				c.fail(rec, r, v, err)
			}
		}
		keyID := ""
		if v != nil {
			keyID = v.key.ID
		}
		// The route's pattern, never the query: a page's filters are no secret, but the log says
		// what was served, and who, by the key's public ID.
		c.opts.Logger.Info("console page", zap.String("route", r.Pattern), zap.Int("status", rec.code()),
			zap.String("key", keyID), zap.Duration("took", time.Since(start)))
	}
}

// session is the viewer of the request's session cookie; nil when it has none that is open. A
// cookie that opens nothing — its session ended, expired or never was — is removed from the
// browser, which so counts against its address once (openedNothing), not on every page.
func (c *Console) session(w http.ResponseWriter, r *http.Request) (*viewer, error) {
	token := cookie(r, sessionCookie)
	if token == "" {
		return nil, nil
	}
	key, err := c.keys.SessionKey(r.Context(), token)
	if errors.Is(err, apikeys.ErrUnauthenticated) {
		c.openedNothing(r)
		setCookie(w, r, sessionCookie, "", timePast)
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &viewer{key: key, token: token}, nil
}

// viewerOf is the request's viewer for a page that needs none (the not-found page's menu); nil
// when the session cannot be read.
func (c *Console) viewerOf(w http.ResponseWriter, r *http.Request) *viewer {
	v, _ := c.session(w, r)
	return v
}

// readForm reads a POST's form, bounded to maxFormBytes; false when it cannot be read.
func readForm(w http.ResponseWriter, r *http.Request) bool {
	r.Body = http.MaxBytesReader(w, r.Body, maxFormBytes)
	return r.ParseForm() == nil
}

// timeZero and timePast are the expiries setCookie takes for a browser-session cookie and for a
// cookie to remove.
var (
	timeZero time.Time
	timePast = time.Unix(1, 0)
)

// refuseForm answers a POST whose CSRF token is missing or wrong: 403, nothing done.
func (c *Console) refuseForm(w http.ResponseWriter, r *http.Request, v *viewer) {
	c.render(w, r, http.StatusForbidden, "error", v, "Form refused",
		"This form was not sent from this console session (its security token is missing or out of date). Nothing was done. Reload the page and try again.")
}

// userError is a page's refusal of what a person sent: a clear sentence, answered 400, with
// nothing written.
type userError struct{ msg string }

func (e *userError) Error() string { return e.msg }

func badInput(format string, args ...any) error { return &userError{msg: fmt.Sprintf(format, args...)} }

// retryAfterUnavailable is the Retry-After of a 503, in seconds, as the API's: the ledger or
// Temporal did not answer in time, and a moment later they may.
const retryAfterUnavailable = "2"

// unavailable reports whether err says that the ledger or Temporal did not answer: a deadline or
// a cancellation — the page's own, or Temporal's, which reports the deadline it was passed in a
// gRPC status a moment before the page's context expires — or a Temporal that cannot be reached.
func unavailable(err error) bool {
	var deadline *serviceerror.DeadlineExceeded
	var canceled *serviceerror.Canceled
	var down *serviceerror.Unavailable
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) ||
		errors.As(err, &deadline) || errors.As(err, &canceled) || errors.As(err, &down)
}

// fail answers a page's error: the not-found page for anything missing — and for another
// account's, which the pages report as missing — a 400 for bad input, a 503 that says to try
// again when the ledger or Temporal did not answer in time, else a 500 that says nothing of the
// cause (which goes to the log).
func (c *Console) fail(w http.ResponseWriter, r *http.Request, v *viewer, err error) {
	var user *userError
	var invalid *ledgerdb.InvalidInputError
	switch {
	case errors.Is(err, errNotFound), errors.Is(err, ledgerdb.ErrUnknownAccount), errors.Is(err, ledgerdb.ErrJobNotFound),
		errors.Is(err, apikeys.ErrKeyNotFound), errors.Is(err, ledgerdb.ErrUnknownKind):
		c.render(w, r, http.StatusNotFound, "notfound", v, "Not found", nil)
	case errors.As(err, &user):
		c.render(w, r, http.StatusBadRequest, "error", v, "Not done", user.msg+" Nothing was changed.")
	case errors.As(err, &invalid):
		c.render(w, r, http.StatusBadRequest, "error", v, "Not done", fmt.Sprintf("The %s %s. Nothing was changed.", invalid.Field, invalid.Reason))
	case unavailable(err):
		c.opts.Logger.Warn("console page unavailable", zap.String("route", r.Pattern), zap.Error(err))
		w.Header().Set("Retry-After", retryAfterUnavailable)
		msg := "The console did not get an answer in time, so it cannot show this page now. Nothing was changed. Try again in a moment."
		if r.Method == http.MethodPost {
			// The step may have been taken as the answer was lost; each of the console's forms
			// can be sent again safely (a redrive sent while the work runs again is ignored).
			msg = "The console did not get an answer in time, so it cannot tell whether this was done. Try again in a moment: sending it again is safe."
		}
		c.render(w, r, http.StatusServiceUnavailable, "error", v, "Try again in a moment", msg)
	default:
		c.opts.Logger.Warn("console page failed", zap.String("route", r.Pattern), zap.Error(err))
		c.render(w, r, http.StatusInternalServerError, "error", v, "Something went wrong",
			"The console could not show this page. Nothing was changed; try again in a moment.")
	}
}

// errNotFound is a page's "no such thing, or not yours": answered exactly alike.
var errNotFound = errors.New("no such page")

// view is what every template gets.
type view struct {
	// Title is the page's title.
	Title string
	// Viewer is who is signed in; nil on the sign-in page.
	Viewer *viewer
	// CSRF is the token the page's forms carry.
	CSRF string
	// Data is the page's own.
	Data any
	// Notice is what the form that led here did, shown once; nil when none.
	Notice *shownNotice
}

// IsAdmin, Account and KeyName let the menu say who is signed in.
func (v view) IsAdmin() bool { return v.Viewer.admin() }

// Account is the signed-in customer's account; "" for an operator.
func (v view) Account() string {
	if v.Viewer == nil {
		return ""
	}
	return v.Viewer.key.AccountID
}

// KeyName is the signed-in key's name and scope.
func (v view) KeyName() string {
	if v.Viewer == nil {
		return ""
	}
	return fmt.Sprintf("%s (%s key)", v.Viewer.key.Name, v.Viewer.key.Scope)
}

// render answers a page: the layout around the named page's template.
func (c *Console) render(w http.ResponseWriter, r *http.Request, status int, name string, v *viewer, title string, data any) {
	csrf := ""
	if v != nil {
		csrf = v.csrf()
	}
	c.renderWith(w, r, status, name, v, title, csrf, data)
}

// renderWith renders as render does, with the forms' CSRF token given (the sign-in page's, before
// there is a session).
func (c *Console) renderWith(w http.ResponseWriter, r *http.Request, status int, name string, v *viewer, title, csrf string, data any) {
	t, ok := c.pages[name]
	if !ok {
		panic("console: no page template " + name)
	}
	vw := view{Title: title, Viewer: v, CSRF: csrf, Data: data, Notice: takeNotice(w, r)}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", vw); err != nil {
		c.opts.Logger.Error("console template failed", zap.String("page", name), zap.Error(err))
		http.Error(w, "The console could not draw this page.", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(b.String()))
}

// parsePages parses each page's template with the layout around it.
func parsePages() map[string]*template.Template {
	names, err := fs.Glob(templateFiles, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, file := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(file, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		pages[name] = template.Must(template.New(name).Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", file))
	}
	return pages
}

// funcs are the templates' helpers.
var funcs = template.FuncMap{
	"when": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"whenp": func(t *time.Time) string {
		if t == nil {
			return ""
		}
		return t.UTC().Format("2006-01-02 15:04:05 UTC")
	},
	"signed": func(n int64) string { return fmt.Sprintf("%+d", n) },
	// credits and signedCredits say an amount with the word that agrees with it: "1 credit",
	// "-40 credits".
	"credits":       func(n int64) string { return plural.Count(n, "credit") },
	"signedCredits": func(n int64) string { return plural.Signed(n, "credit") },
	// unit names what a kind is sold by, and units counts it: "GPU-second", "300 GPU-seconds".
	"unit":  unitName,
	"units": func(n int64, u ledgerdb.Unit) string { return plural.Count(n, unitName(u)) },
}

// unitName is what a kind is sold by, in words.
func unitName(u ledgerdb.Unit) string {
	if u == ledgerdb.UnitGPUSecond {
		return "GPU-second"
	}
	return string(u)
}

// waitWords says a wait of whole seconds as a person reads it: seconds up to a minute and a half,
// then minutes up to an hour and a half, then hours, each rounded up.
func waitWords(seconds int) string {
	switch {
	case seconds <= 90:
		return plural.Count(seconds, "second")
	case seconds <= 90*60:
		return plural.Count((seconds+59)/60, "minute")
	}
	return plural.Count((seconds+3599)/3600, "hour")
}

// statusWriter notes the status a page answered, for the log line.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) code() int {
	if s.status == 0 {
		return http.StatusOK
	}
	return s.status
}
