package ledgerdb

import (
	"fmt"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Limits on what callers may pass in. They are checked before anything reaches the database.
const (
	// MaxIDLength is the longest job ID, account ID or idempotency key, in bytes.
	MaxIDLength = 128
	// MaxAmount is the largest cost, grant or adjustment, in credits. It keeps every sum of a
	// realistic account far from the int64 limit, so balances never overflow.
	MaxAmount int64 = 1_000_000_000_000_000
	// MaxBalance bounds an account's exposures: its balance plus every pending refund (the costs
	// of its running jobs) may not exceed it, and its balance minus every pending reclaim (the
	// costs of its refunded jobs) may not go below -MaxBalance. A refund or reclaim is never
	// refused, so this is what keeps each of them inside a 64-bit balance: grants, adjustments
	// and charges that would cross it are refused instead. The schema's ledger_max_balance()
	// answers the same number.
	MaxBalance int64 = 1_000_000_000_000_000_000
	// MaxTextLength is the longest memo or reason, in bytes.
	MaxTextLength = 512
	// MaxRequestLength is the longest submitted request the ledger keeps, in bytes.
	MaxRequestLength = 64 << 10
)

// idPattern is the shape of every ID and key: printable ASCII that is safe in a URL path, a
// Temporal workflow ID and a log line. The schema's CHECK constraints repeat it.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// ValidateID checks a job ID, account ID or idempotency key; field names it in the error.
func ValidateID(field, id string) error {
	switch {
	case id == "":
		return &InvalidInputError{Field: field, Reason: "must not be empty"}
	case len(id) > MaxIDLength:
		return &InvalidInputError{Field: field, Reason: fmt.Sprintf("is %d bytes; at most %d are allowed", len(id), MaxIDLength)}
	case !idPattern.MatchString(id):
		return &InvalidInputError{Field: field, Reason: fmt.Sprintf("%q may hold only letters, digits and . _ : - and must start with a letter or digit", id)}
	}
	return nil
}

// ValidateAmount checks a cost or grant: a whole number of credits above zero and at most MaxAmount.
func ValidateAmount(field string, amount int64) error {
	switch {
	case amount <= 0:
		return &InvalidInputError{Field: field, Reason: fmt.Sprintf("is %d; it must be above zero", amount)}
	case amount > MaxAmount:
		return &InvalidInputError{Field: field, Reason: fmt.Sprintf("is %d; at most %d credits are allowed", amount, MaxAmount)}
	}
	return nil
}

// ValidateText is the ledger's one rule for free text that comes from outside — memos, reasons,
// input and output references, notes — at every door, the command line's and the API's alike: at
// most maxBytes bytes of valid UTF-8, without a control character (Unicode Cc: C0, DEL, C1) or an
// invisible formatting character (Cf: zero-width spaces and joiners, direction marks,
// bidirectional embeddings, overrides and isolates, invisible operators, the byte order mark, soft
// hyphens, tags). Such characters make text read differently from what it is — an override turns
// "s3://in/\u202egpj.exe" into what looks like an .exe — on a support screen, in a log line or in
// the Temporal UI. field names the text in the error, which names the character.
func ValidateText(field, text string, maxBytes int) error {
	switch {
	case len(text) > maxBytes:
		return &InvalidInputError{Field: field, Reason: fmt.Sprintf("is %d bytes; at most %d are allowed", len(text), maxBytes)}
	case !utf8.ValidString(text):
		return &InvalidInputError{Field: field, Reason: "is not valid UTF-8"}
	}
	for _, r := range text {
		if hidden(r) {
			return &InvalidInputError{Field: field, Reason: fmt.Sprintf("must not contain the invisible or control character %U", r)}
		}
	}
	return nil
}

// hidden reports whether r is a character [ValidateText] refuses and [ClipText] replaces: any
// character that is not graphic — control and formatting characters (bidirectional overrides,
// zero widths), line and paragraph separators, private use, surrogates and unassigned code
// points — and the graphic ones that show nothing: blank fillers and variation selectors, which
// can hide text in a string that looks short. Combining marks, which many scripts need, pass.
func hidden(r rune) bool {
	if !unicode.IsGraphic(r) {
		return true
	}
	switch {
	case r == 0x115F, r == 0x1160, r == 0x3164, r == 0xFFA0, // Hangul fillers
		r == 0x2800,              // braille blank
		r == 0x17B4, r == 0x17B5, // Khmer inherent vowels
		r >= 0x180B && r <= 0x180F,   // Mongolian variation selectors and vowel separator
		r >= 0xFE00 && r <= 0xFE0F,   // variation selectors
		r >= 0xE0100 && r <= 0xE01EF: // variation selectors supplement
		return true
	}
	return false
}

// clipLength is the most bytes [ClipText] keeps of a text, before the "…" that marks a cut.
const clipLength = 240

// ClipText makes any text fit where the ledger keeps words from outside (a refund's detail made of
// a GPU service's message, an alarm's database error): invalid UTF-8 is replaced, the characters
// [ValidateText] refuses become spaces, and the text is cut, at a rune boundary, to 240
// bytes and a "…", well under MaxTextLength, so that it always passes the rule. A refused text
// must never block a refund, so such text is clipped, not refused. Words that may carry a
// credential go through [ScrubText], which clips too.
func ClipText(s string) string { return clip(printable(s)) }

// printable replaces invalid UTF-8 with "?" and every character [ValidateText] refuses with a
// space.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if hidden(r) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "?"))
}

// clip cuts valid UTF-8 to clipLength bytes, at a rune boundary, and marks the cut with "…".
func clip(s string) string {
	if len(s) <= clipLength {
		return s
	}
	cut := clipLength
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
