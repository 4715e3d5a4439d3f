package apiclient

import (
	"crypto/rand"
	"encoding/base32"
	"fmt"
	"regexp"
)

// The ledger's rules for a job ID (ledgerdb.ValidateID, repeated here so that the client does
// not import the ledger): at most maxIDLength bytes of letters, digits and . _ : -, starting with
// a letter or digit.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

const maxIDLength = 128

// idEncoding writes the random part: lower-case base32 without padding, so 16 bytes are 26
// characters, all valid in an ID.
var idEncoding = base32.NewEncoding("abcdefghijklmnopqrstuvwxyz234567").WithPadding(base32.NoPadding)

// randomIDLength is the length of the random part: 128 bits in base32.
const randomIDLength = 26

// NewJobID makes a job ID no other submission will have: the prefix (a kind or a product's
// name, for people reading logs; none when empty), a dash, and 128 random bits from crypto/rand
// in lower-case base32 — 26 characters. Make it once per job, save it with the job's body
// ([Client.Track]), and send every retry under it: the ID is what makes a retry the same job, and
// an ID that was ever accepted is remembered forever, so a predictable one (a timestamp, a
// counter) can collide with another job and answer that job instead of charging this one. A
// prefix that would make an ID the ledger refuses is an ErrInvalidInput.
func NewJobID(prefix string) (string, error) {
	var bits [16]byte
	_, _ = rand.Read(bits[:]) // crypto/rand.Read never fails; it crashes the program instead.
	random := idEncoding.EncodeToString(bits[:])
	if prefix == "" {
		return random, nil
	}
	id := prefix + "-" + random
	switch {
	case len(id) > maxIDLength:
		return "", fmt.Errorf("%w: prefix %q is %d bytes; with the random part a job ID may take at most %d", ErrInvalidInput,
			prefix, len(prefix), maxIDLength-randomIDLength-1)
	case !idPattern.MatchString(id):
		return "", fmt.Errorf("%w: prefix %q may hold only letters, digits and . _ : - and must start with a letter or digit", ErrInvalidInput, prefix)
	}
	return id, nil
}
