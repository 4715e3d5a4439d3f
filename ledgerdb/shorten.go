package ledgerdb

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// Shorten shortens text a caller sent for a message that quotes it: at most maxRunes characters,
// cut between characters and never between the bytes of one (which a quoted string would print
// as \xe2\x82, and which would break a page's UTF-8), at the end of a word when one ends in the
// last third of them, and marked with "…". Text that fits is answered whole.
func Shorten(s string, maxRunes int) string {
	if utf8.RuneCountInString(s) <= maxRunes {
		return s
	}
	cut, n, lastSpace := len(s), 0, -1
	for i, r := range s {
		if n == maxRunes {
			cut = i
			if unicode.IsSpace(r) {
				lastSpace = i
			}
			break
		}
		if unicode.IsSpace(r) && n >= maxRunes*2/3 {
			lastSpace = i
		}
		n++
	}
	if lastSpace > 0 {
		cut = lastSpace
	}
	return strings.TrimRightFunc(s[:cut], unicode.IsSpace) + "…"
}
