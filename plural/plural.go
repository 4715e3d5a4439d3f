// Package plural is where jobbill's words agree with their numbers: "1 credit", "40 credits",
// "1 attempt", "was" or "were". Every sentence a customer or an operator reads that puts a count
// before a noun makes the noun here, so that no page, story or answer says "1 credits".
package plural

import "fmt"

// Integer is any signed integer type a count is kept in.
type Integer interface {
	~int | ~int8 | ~int16 | ~int32 | ~int64
}

// Of answers one when n is 1 or -1, and many otherwise (0 credits, 2 credits, -5 credits): the
// word that agrees with n — a noun ("credit", "credits") or a verb ("was", "were").
func Of[N Integer](n N, one, many string) string {
	if n == 1 || n == -1 {
		return one
	}
	return many
}

// Count is n and the noun that agrees with it, for a noun whose plural adds an s: "1 credit",
// "40 credits", "1 GPU-second".
func Count[N Integer](n N, noun string) string {
	return fmt.Sprintf("%d %s", n, Of(n, noun, noun+"s"))
}

// Signed is Count with the sign always written, for a change: "+1 credit", "-40 credits".
func Signed[N Integer](n N, noun string) string {
	return fmt.Sprintf("%+d %s", n, Of(n, noun, noun+"s"))
}
