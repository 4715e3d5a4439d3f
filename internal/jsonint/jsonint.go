// Package jsonint reads the integers of a JSON payload as every language writes them: the one rule
// every door of jobbill applies — the HTTP API's bodies, a MeteredJob's input and its signals.
//
// JSON has one kind of number, and writers differ: Python's json.dumps writes any float with a
// fraction (50.0, -0.0) and a large one with an exponent (1e+20), JavaScript writes 1e+21, and
// generated or hand-written JSON says 5e1. JSON Schema counts each of them an integer when its
// value is whole, and so does jobbill: an integer field takes any JSON number whose value is a
// whole number in the field's range, however it is written. A fraction (50.5) is refused, and so is
// a number beyond the field's range (1e400), with a reason that names the field ([Refusal]).
// encoding/json alone refuses 50.0 for an int64: [Normalize] rewrites such numbers as plain digits
// before a payload is decoded.
package jsonint

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// Normalize returns data, a JSON document, with every number whose value is a whole number that
// fits an int64 written as plain digits: 50.0, 5e1, 5.0E1, 500e-1 and -0.0 become 50, 50, 50, 50
// and 0. Every other byte is kept as it was — strings, keys, white space, and the numbers that are
// not such a whole number (50.5, 1e400, 1e+20), which the decoder then refuses for an integer
// field and reads as before for a float one. data itself is returned when nothing needed
// rewriting, and when it is not valid JSON, so that the decoder's complaint is about what its
// sender wrote.
func Normalize(data []byte) []byte {
	if !json.Valid(data) {
		return data
	}
	var out []byte // nil until a number is rewritten
	copied := 0    // data[:copied] is in out
	inString, escaped := false, false
	for i := 0; i < len(data); {
		c := data[i]
		switch {
		case inString:
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			i++
		case c == '"':
			inString = true
			i++
		case c == '-' || ('0' <= c && c <= '9'):
			// Outside a string of valid JSON, only a number starts so; it runs to the next byte
			// that cannot be part of one.
			end := i + 1
			for end < len(data) && strings.IndexByte("0123456789+-.eE", data[end]) >= 0 {
				end++
			}
			literal := string(data[i:end])
			if digits, ok := wholeDigits(literal); ok && digits != literal {
				out = append(append(out, data[copied:i]...), digits...)
				copied = end
			}
			i = end
		default:
			i++
		}
	}
	if out == nil {
		return data
	}
	return append(out, data[copied:]...)
}

// wholeDigits returns the plain digits of literal, a JSON number, when its value is a whole
// number that fits an int64.
func wholeDigits(literal string) (string, bool) {
	n := parse(literal)
	switch {
	case n.digits == "":
		return "0", true // 0, -0.0, 0e999…
	case n.scale < 0 || len(n.digits)+n.scale > 19:
		return "", false // a fraction, or more digits than an int64 has
	}
	digits := n.digits + strings.Repeat("0", n.scale)
	if n.negative {
		digits = "-" + digits
	}
	if _, err := strconv.ParseInt(digits, 10, 64); err != nil {
		return "", false
	}
	return digits, true
}

// number is a JSON number read exactly, as a decimal: its value is ±digits × 10^scale, with
// digits free of leading and trailing zeros ("" for zero). Read so, 0.1e1 is 1, and
// 9007199254740993.0 is 9007199254740993, which a float64 would round.
type number struct {
	negative bool
	digits   string
	scale    int
}

// maxExponent bounds the exponent parse keeps: beyond it a nonzero value is far beyond an int64 or
// far below 1 either way, and the bound keeps the arithmetic on scale safe.
const maxExponent = 1 << 20

// parse reads literal, a valid JSON number.
func parse(literal string) number {
	n := number{negative: strings.HasPrefix(literal, "-")}
	mantissa, exponent := strings.TrimPrefix(literal, "-"), "0"
	if i := strings.IndexAny(mantissa, "eE"); i >= 0 {
		mantissa, exponent = mantissa[:i], mantissa[i+1:]
	}
	exp, err := strconv.Atoi(exponent)
	if err != nil || exp > maxExponent || exp < -maxExponent {
		exp = maxExponent
		if strings.HasPrefix(exponent, "-") {
			exp = -maxExponent
		}
	}
	whole, fraction, _ := strings.Cut(mantissa, ".")
	n.digits, n.scale = strings.TrimLeft(whole+fraction, "0"), exp-len(fraction)
	for n.digits != "" && strings.HasSuffix(n.digits, "0") {
		n.digits, n.scale = n.digits[:len(n.digits)-1], n.scale+1
	}
	return n
}

// Refusal says why the decoder refused a number for an integer field, naming the field as the
// payload does (the last part of its path): "must be a whole number (50, 50.0 or 5e1), not 50.5"
// for a fraction, "is 1e400, too large" for a whole number beyond the field's Go type. ok is false
// for any other error, which the caller reports as it does.
func Refusal(err error) (field, reason string, ok bool) {
	var typ *json.UnmarshalTypeError
	if !errors.As(err, &typ) || typ.Field == "" || typ.Type == nil || !isInteger(typ.Type.Kind()) {
		return "", "", false
	}
	literal, isNumber := strings.CutPrefix(typ.Value, "number ")
	if !isNumber {
		return "", "", false
	}
	field = typ.Field[strings.LastIndex(typ.Field, ".")+1:]
	switch n := parse(literal); {
	case n.digits != "" && n.scale < 0:
		return field, fmt.Sprintf("must be a whole number (50, 50.0 or 5e1), not %s", literal), true
	case n.negative:
		return field, fmt.Sprintf("is %s, too small", literal), true
	}
	return field, fmt.Sprintf("is %s, too large", literal), true
}

// isInteger reports whether a Go kind is one of the integer kinds.
func isInteger(k reflect.Kind) bool {
	switch k {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}
