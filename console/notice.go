package console

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// A notice is a sentence a page shows once, after the form whose POST redirected to it: what the
// form did, or why it did nothing. The form leaves a cookie that names the notice, the page it is
// for and one fact to fill in; that page shows it and removes the cookie. The cookie names a
// notice of the fixed list below, never its words, so a cookie set by anyone else can show
// nothing but these sentences, and its fact only in the shape of an ID.

// noticeCookie holds the notice a form left for the page it redirected to.
const noticeCookie = "jobbill_notice"

// noticeLifetime is how long a notice waits for its page: the redirect is followed at once.
const noticeLifetime = time.Minute

// The notices.
const (
	noticeRedriveStarted    = "redrive-started"
	noticeRedriveRefused    = "redrive-refused"
	noticeRedriveIDTaken    = "redrive-id-taken"
	noticeKeyRevoked        = "key-revoked"
	noticeKeyAlreadyRevoked = "key-already-revoked"
)

// noticeText is each notice's sentence, with a %s for its fact where it has one, and whether it
// says that nothing was done.
var noticeText = map[string]struct {
	text    string
	problem bool
}{
	noticeRedriveStarted: {text: "Its work is running again. The job stays refunded while it runs: if the work succeeds, the refund " +
		"is taken back and the job shows recovered; if it fails again, the job stays a dead letter and its attempts go up. Reload " +
		"this page to see which; the Temporal UI timeline shows each attempt."},
	noticeRedriveRefused: {problem: true, text: "Not run again: only a refunded (dead-lettered) job's work can run again, and this " +
		"job is %s. Nothing was changed."},
	noticeRedriveIDTaken: {problem: true, text: "Not run again: another program's workflow holds this job's workflow ID, so its " +
		"work cannot run again until that workflow closes. Nothing was changed."},
	noticeKeyRevoked:        {text: "Key %s is revoked: it opens nothing from now on, and every console session opened with it has ended."},
	noticeKeyAlreadyRevoked: {text: "Key %s was revoked already. Nothing was changed."},
}

// noticeFact is the shape a notice's fact may have: an ID, a state in a word or two.
var noticeFact = regexp.MustCompile(`^[A-Za-z0-9._: -]{0,128}$`)

// shownNotice is a notice as a page shows it.
type shownNotice struct {
	Text string
	// Problem marks a notice that says why nothing was done.
	Problem bool
}

// notify leaves the notice, with its fact, for the page at path, which the caller redirects to.
func notify(w http.ResponseWriter, r *http.Request, path, notice, fact string) {
	value := base64.RawURLEncoding.EncodeToString([]byte(notice + "\x00" + path + "\x00" + fact))
	setCookie(w, r, noticeCookie, value, time.Now().Add(noticeLifetime))
}

// takeNotice is the notice left for this request's page, if any, and removes any notice the
// browser holds: a notice is shown once, and one whose page was not the next is dropped.
func takeNotice(w http.ResponseWriter, r *http.Request) *shownNotice {
	value := cookie(r, noticeCookie)
	if value == "" {
		return nil
	}
	setCookie(w, r, noticeCookie, "", timePast)
	raw, err := base64.RawURLEncoding.DecodeString(value)
	if err != nil {
		return nil
	}
	parts := strings.Split(string(raw), "\x00")
	if len(parts) != 3 || parts[1] != r.URL.Path || !noticeFact.MatchString(parts[2]) {
		return nil
	}
	n, ok := noticeText[parts[0]]
	if !ok {
		return nil
	}
	text := n.text
	if strings.Contains(text, "%s") {
		text = fmt.Sprintf(text, parts[2])
	}
	return &shownNotice{Text: text, Problem: n.problem}
}
