package ledgerdb

import (
	"fmt"
	"regexp"
	"strings"
)

// Reason says why a job was not delivered (it was refunded) or not started (it was rejected), as
// a code from a fixed vocabulary. What a customer reads about such a job is the code and the
// code's fixed text ([Reason.Text]), never words from outside: a GPU service's error, a
// workflow's failure or an operator's note may name internal hosts or carry a password. Those
// words are the operator's detail, scrubbed ([ScrubText]) and kept beside the code (docs/design.md,
// "What a customer reads"; docs/api.md lists the codes).
type Reason string

// The codes a refund records (the jobs.refund_reason_code column, whose CHECK lists the same).
const (
	// ReasonTimedOut: the work did not finish in time (its attempts ran out of time).
	ReasonTimedOut Reason = "timed_out"
	// ReasonGPUFailed: the work failed on the GPU side (the runner reported a failure).
	ReasonGPUFailed Reason = "gpu_failed"
	// ReasonInvalidResult: the GPU service answered something jobbill cannot bill (a negative
	// usage, an unknown status, an unreadable answer).
	ReasonInvalidResult Reason = "invalid_result"
	// ReasonStoppedByOperator: an operator cancelled or terminated the job's workflow, and the job
	// was refunded (by the run itself, or healed).
	ReasonStoppedByOperator Reason = "stopped_by_operator"
	// ReasonInterrupted: the job's workflow failed, timed out or vanished before it settled the
	// job, and the job was healed.
	ReasonInterrupted Reason = "interrupted"
	// ReasonUnknown: the refund names no cause the vocabulary knows; jobs refunded before the
	// codes, whose words said none of the above, carry it.
	ReasonUnknown Reason = "unknown"
)

// The codes a rejection is told with ([RejectReason.Reason]): never charged.
const (
	// ReasonInsufficientCredits: the account could not pay the job's hold.
	ReasonInsufficientCredits Reason = "insufficient_credits"
	// ReasonExposureLimit: the account has too many refunded jobs awaiting a late result.
	ReasonExposureLimit Reason = "exposure_limit"
	// ReasonRejected: no workflow could charge the job — its workflow ended before charging it,
	// or its ID is held by another program's workflow.
	ReasonRejected Reason = "rejected"
)

// reasonTexts are the fixed words a customer reads for each code; the messages of package jobs
// put them in a sentence ("Not delivered: the work did not finish in time.").
var reasonTexts = map[Reason]string{
	ReasonTimedOut:            "the work did not finish in time",
	ReasonGPUFailed:           "the work failed on the GPU side",
	ReasonInvalidResult:       "the GPU service returned a result that could not be billed",
	ReasonStoppedByOperator:   "the job was stopped by an operator",
	ReasonInterrupted:         "the job was interrupted before it finished",
	ReasonUnknown:             "the work could not be completed",
	ReasonInsufficientCredits: "the account did not have enough credits when the job was submitted",
	ReasonExposureLimit:       "the account has too many refunded jobs awaiting a late result",
	ReasonRejected:            "the job could not be started",
}

// refundReasons are the codes a refund may record, in the order docs/api.md lists them.
func refundReasons() []Reason {
	return []Reason{ReasonTimedOut, ReasonGPUFailed, ReasonInvalidResult, ReasonStoppedByOperator, ReasonInterrupted, ReasonUnknown}
}

// Reasons is the whole vocabulary a customer may read: the refund codes, then the rejection codes.
func Reasons() []Reason {
	return append(refundReasons(), ReasonInsufficientCredits, ReasonExposureLimit, ReasonRejected)
}

// Text is the fixed words a customer reads for the code; a code outside the vocabulary reads as
// [ReasonUnknown] does.
func (r Reason) Text() string {
	if text, ok := reasonTexts[r]; ok {
		return text
	}
	return reasonTexts[ReasonUnknown]
}

// ValidateRefundReason checks that a refund names one of the codes a refund may record.
func ValidateRefundReason(r Reason) error {
	for _, known := range refundReasons() {
		if r == known {
			return nil
		}
	}
	return &InvalidInputError{Field: "refund reason", Reason: fmt.Sprintf("%q is not a refund reason code (%s)", r, joinReasons(refundReasons()))}
}

func joinReasons(rs []Reason) string {
	names := make([]string, len(rs))
	for i, r := range rs {
		names[i] = string(r)
	}
	return strings.Join(names, ", ")
}

// Reason is the code a customer reads for this rejection. The two rejections that say how
// jobbill's workflows stood read alike to a customer: the job was never started, and a new ID is
// the way forward; [RejectReason.Describe] keeps the difference for operators.
func (r RejectReason) Reason() Reason {
	switch r {
	case RejectInsufficientCredits:
		return ReasonInsufficientCredits
	case RejectExposureLimit:
		return ReasonExposureLimit
	}
	return ReasonRejected
}

// The credential shapes ScrubText masks. Each keeps what says where the credential was (the
// scheme and user, the key's name) and masks its value with secretMask.
var (
	// A URL's userinfo, "scheme://user:password@" or "scheme://token@". The password runs to the
	// last "@" before a space, so that a password holding "@" is masked whole.
	urlUserinfo = regexp.MustCompile(`(?i)([a-z][a-z0-9+.-]*://)([^\s/?#@:]*)(:\S*)?@`)
	// "Authorization: Bearer …" (and Basic, Digest, Token) as a header or a key.
	authorizationHeader = regexp.MustCompile(`(?i)(authorization["']?\s*[:=]\s*["']?)(?:(bearer|basic|digest|token)\s+)?[^\s"',;&]+`)
	// A bearer token on its own.
	bearerToken = regexp.MustCompile(`(?i)\b(bearer)\s+[^\s"',;&]+`)
	// A key that names a secret, "password=…", "db_password: …", `"api_key":"…"`, and the
	// value after it.
	secretKeyValue = regexp.MustCompile(`(?i)([a-z0-9_.-]*(?:password|passwd|pwd|secret|token|api[_-]?key|access[_-]?key|private[_-]?key|credentials?)[a-z0-9_.-]*["']?\s*[:=]\s*["']?)[^\s"',;&]+`)
	// A long run of key-like characters (hex, base64) right after a word that names a secret:
	// "invalid token 3f9a…".
	secretAfterWord = regexp.MustCompile(`(?i)\b(password|passwd|secret|token|key)(\s+)[a-z0-9+/=_.-]{16,}`)
)

// secretMask replaces every credential ScrubText finds.
const secretMask = "***"

// scrubWindow bounds the text ScrubText masks, so that a huge message costs a workflow task no
// more than a short one: only its first clipLength bytes are kept anyway, and a credential that
// starts among them and runs past the window is longer than the window.
const scrubWindow = 16 << 10

// ScrubText makes words from outside — a GPU service's error, a workflow's failure, an operator's
// reason — fit to keep in the ledger and show to operators: anything that looks like a credential
// is masked (a URL's password, "scheme://user:pass@" → "scheme://user:***@", or its lone user, a
// token; password=, token=, secret=, api_key= and their kin; "Authorization: Bearer …"; a long
// key after such a word) — after control characters became spaces, as [ClipText] makes them, and
// before the text is clipped as ClipText clips it, so that a cut never parts a credential from the
// words that mark it. It is pure and deterministic: workflow code calls it.
//
// It does not make the words fit for a customer: they may still name internal hosts. A customer
// reads a [Reason] and its text.
func ScrubText(s string) string {
	if len(s) > scrubWindow {
		s = s[:scrubWindow]
	}
	s = printable(s)
	s = urlUserinfo.ReplaceAllStringFunc(s, func(m string) string {
		parts := urlUserinfo.FindStringSubmatch(m)
		if parts[3] == "" {
			// No password: a lone user in a URL is as often a token ("https://ghp_…@github.com").
			return parts[1] + secretMask + "@"
		}
		return parts[1] + parts[2] + ":" + secretMask + "@"
	})
	s = authorizationHeader.ReplaceAllStringFunc(s, func(m string) string {
		parts := authorizationHeader.FindStringSubmatch(m)
		if parts[2] == "" {
			return parts[1] + secretMask
		}
		return parts[1] + parts[2] + " " + secretMask
	})
	s = bearerToken.ReplaceAllString(s, "${1} "+secretMask)
	s = secretKeyValue.ReplaceAllString(s, "${1}"+secretMask)
	s = secretAfterWord.ReplaceAllString(s, "${1}${2}"+secretMask)
	return clip(s)
}
