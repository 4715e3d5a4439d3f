package webhooks

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/jobbill/jobbill/ledgerdb"
)

// The Standard Webhooks headers every delivery carries (https://www.standardwebhooks.com).
const (
	// HeaderID is the event's ID: the same on every delivery of the event, so that a receiver
	// recognises a duplicate.
	HeaderID = standardwebhooks.HeaderWebhookID
	// HeaderTimestamp is when this attempt was signed, in Unix seconds; receivers refuse one too
	// far from their clock, so a captured request cannot be replayed later.
	HeaderTimestamp = standardwebhooks.HeaderWebhookTimestamp
	// HeaderSignature is "v1,<base64 of HMAC-SHA256 over id.timestamp.body>" with the endpoint's
	// secret.
	HeaderSignature = standardwebhooks.HeaderWebhookSignature
)

// NewSecret is a fresh signing secret: "whsec_" and 32 random bytes in base64, the form the
// Standard Webhooks libraries read.
func NewSecret() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // never fails: crypto/rand crashes the program rather than return less
	return "whsec_" + base64.StdEncoding.EncodeToString(b)
}

// Sign sets the three Standard Webhooks headers of a delivery of the event id with body, signed
// at now with secret, through the Standard Webhooks library (so that its verifier, which a
// receiver runs, agrees by construction).
func Sign(h http.Header, secret, id string, now time.Time, body []byte) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return fmt.Errorf("the endpoint's secret cannot sign: %w", err)
	}
	sig, err := wh.Sign(id, now, body)
	if err != nil {
		return err
	}
	h.Set(HeaderID, id)
	h.Set(HeaderTimestamp, strconv.FormatInt(now.Unix(), 10))
	h.Set(HeaderSignature, sig)
	return nil
}

// Verify checks a delivery as a receiver does, with the Standard Webhooks library: the signature
// must be the secret's over the headers' ID and timestamp and the body, and the timestamp within
// five minutes of now. The tests check deliveries with it; receivers use their language's library.
func Verify(secret string, h http.Header, body []byte) error {
	wh, err := standardwebhooks.NewWebhook(secret)
	if err != nil {
		return err
	}
	return wh.Verify(body, h)
}

var (
	endpointIDPattern = regexp.MustCompile(`^we_[0-9A-Za-z]{16,64}$`)
	eventIDPattern    = regexp.MustCompile(`^msg_[0-9a-f]{32}$`)
)

// newEndpointID is a fresh endpoint ID: "we_" and 128 random bits in hex.
func newEndpointID() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b)
	return "we_" + hex.EncodeToString(b)
}

// ValidateEndpointID checks the form of an endpoint's ID ("we_…").
func ValidateEndpointID(id string) error {
	if !endpointIDPattern.MatchString(id) {
		return &ledgerdb.InvalidInputError{Field: "endpoint ID", Reason: fmt.Sprintf("%q is not an endpoint ID (we_ and 16 to 64 letters or digits)", clip(id))}
	}
	return nil
}

// ValidateEventID checks the form of an event's ID ("msg_…").
func ValidateEventID(id string) error {
	if !eventIDPattern.MatchString(id) {
		return &ledgerdb.InvalidInputError{Field: "event_id", Reason: fmt.Sprintf("%q is not an event ID (msg_ and 32 hex digits)", clip(id))}
	}
	return nil
}

// clip shortens what a caller sent for an error message, by whole characters.
func clip(s string) string { return ledgerdb.Shorten(s, 64) }
