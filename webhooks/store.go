package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Errors the Store answers, usable with errors.Is.
var (
	// ErrEndpointNotFound: no endpoint has the ID (or, for a caller that names an account, none of
	// that account's).
	ErrEndpointNotFound = errors.New("no such webhook endpoint")
	// ErrEndpointDisabled: the endpoint was deleted; it receives nothing and cannot be rotated or
	// replayed to.
	ErrEndpointDisabled = errors.New("the webhook endpoint is deleted")
	// ErrTooManyEndpoints: the account already has MaxEndpoints enabled endpoints.
	ErrTooManyEndpoints = errors.New("the account has as many webhook endpoints as it may")
	// ErrUnknownEvent: no event of the endpoint's account has the ID.
	ErrUnknownEvent = errors.New("no such event")
)

// MaxEndpoints is how many enabled endpoints one account may have (ledger_webhook_create_endpoint
// holds the same number): each event is sent to every one of them.
const MaxEndpoints = 10

// MaxDescriptionLength is the longest description an endpoint may have, in characters.
const MaxDescriptionLength = 200

// Store keeps webhook endpoints, events, deliveries and thresholds in the ledger's database. It
// works as the application role, which reads the tables and changes them only through the
// ledger_webhook_* functions. It is safe for concurrent use.
type Store struct {
	pool *pgxpool.Pool
}

// NewStore is a Store on the ledger's pool (ledgerdb.Store.Pool). It does not own the pool.
func NewStore(pool *pgxpool.Pool) *Store { return &Store{pool: pool} }

// Endpoint is a receiver of an account's events, as its owner reads it: never its secret.
type Endpoint struct {
	// ID names the endpoint ("we_…").
	ID string `json:"id"`
	// AccountID is the account whose events it receives.
	AccountID string `json:"account_id"`
	// URL is where the events are POSTed.
	URL string `json:"url"`
	// Description says what the endpoint is for.
	Description string `json:"description"`
	// Status is enabled, or disabled once deleted.
	Status string `json:"status"`
	// CreatedAt is when it was made.
	CreatedAt time.Time `json:"created_at"`
	// RotatedAt is when its secret was last replaced, if ever.
	RotatedAt *time.Time `json:"rotated_at,omitempty"`
	// DisabledAt is when it was deleted, if it was.
	DisabledAt *time.Time `json:"disabled_at,omitempty"`
}

// Created is an endpoint with its signing secret, answered once: when it is made or its secret is
// rotated. The secret is never shown again.
type Created struct {
	Endpoint
	// Secret is the signing secret ("whsec_…"), for the receiver's verifier.
	Secret string `json:"secret"`
}

// endpointColumns selects an endpoint's public columns from e (never its secret).
func endpointColumns(e string) string {
	return fmt.Sprintf(`%[1]s.id, %[1]s.account_id, %[1]s.url, %[1]s.description, %[1]s.created_at, %[1]s.rotated_at, %[1]s.disabled_at`, e)
}

// endpointRow scans what endpointColumns selects; every field may be NULL when a function found no
// endpoint.
type endpointRow struct {
	id, account, url, description *string
	created, rotated, disabled    *time.Time
}

func (r *endpointRow) targets() []any {
	return []any{&r.id, &r.account, &r.url, &r.description, &r.created, &r.rotated, &r.disabled}
}

func (r *endpointRow) endpoint() Endpoint {
	e := Endpoint{ID: *r.id, AccountID: *r.account, URL: *r.url, Description: *r.description, CreatedAt: r.created.UTC(), Status: "enabled"}
	if r.rotated != nil {
		t := r.rotated.UTC()
		e.RotatedAt = &t
	}
	if r.disabled != nil {
		t := r.disabled.UTC()
		e.DisabledAt, e.Status = &t, "disabled"
	}
	return e
}

// EndpointSpec is what makes an endpoint.
type EndpointSpec struct {
	// AccountID is the account whose events it receives.
	AccountID string
	// URL is where they are sent; see [URLPolicy].
	URL string
	// Description says what it is for (at most MaxDescriptionLength characters).
	Description string
}

// CreateEndpoint makes an endpoint as spec says, its URL checked by policy, and answers it with
// its secret, shown this once. Bad input is refused before anything is written
// ([*ledgerdb.InvalidInputError]); an account that does not exist is [ledgerdb.ErrUnknownAccount]
// and one with MaxEndpoints endpoints [ErrTooManyEndpoints], nothing written.
func (s *Store) CreateEndpoint(ctx context.Context, spec EndpointSpec, policy URLPolicy) (Created, error) {
	if err := ledgerdb.ValidateID("account_id", spec.AccountID); err != nil {
		return Created{}, err
	}
	if err := policy.Check(spec.URL); err != nil {
		return Created{}, err
	}
	if err := ledgerdb.ValidateText("description", spec.Description, 4*MaxDescriptionLength); err != nil {
		return Created{}, err
	}
	if n := len([]rune(spec.Description)); n > MaxDescriptionLength {
		return Created{}, &ledgerdb.InvalidInputError{Field: "description", Reason: fmt.Sprintf("is %d characters; at most %d are allowed", n, MaxDescriptionLength)}
	}
	secret := NewSecret()
	var outcome string
	var row endpointRow
	err := s.pool.QueryRow(ctx, `SELECT r.outcome, `+endpointColumns("(r.endpoint)")+`
		FROM ledger_webhook_create_endpoint($1, $2, $3, $4, $5) r`,
		newEndpointID(), spec.AccountID, spec.URL, secret, spec.Description).Scan(append([]any{&outcome}, row.targets()...)...)
	if err != nil {
		return Created{}, refusal(err)
	}
	switch outcome {
	case "unknown_account":
		return Created{}, fmt.Errorf("account %q: %w", spec.AccountID, ledgerdb.ErrUnknownAccount)
	case "too_many":
		return Created{}, fmt.Errorf("account %q: %w (%d)", spec.AccountID, ErrTooManyEndpoints, MaxEndpoints)
	}
	return Created{Endpoint: row.endpoint(), Secret: secret}, nil
}

// refusal maps the database's refusal of an endpoint (its CHECK constraints, which the Go side
// checks first) to bad input.
func refusal(err error) error {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && (pgErr.Code == "23514" || pgErr.Code == "22023") {
		return &ledgerdb.InvalidInputError{Field: "webhook", Reason: pgErr.Message}
	}
	return err
}

// Endpoints answers an account's endpoints, oldest first, deleted ones too; never a secret.
func (s *Store) Endpoints(ctx context.Context, accountID string) ([]Endpoint, error) {
	if err := ledgerdb.ValidateID("account_id", accountID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT `+endpointColumns("e")+` FROM webhook_endpoints e
		WHERE e.account_id = $1 ORDER BY e.created_at, e.id`, accountID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Endpoint{}
	for rows.Next() {
		var row endpointRow
		if err := rows.Scan(row.targets()...); err != nil {
			return nil, err
		}
		out = append(out, row.endpoint())
	}
	return out, rows.Err()
}

// Endpoint answers the account's endpoint with the ID; an endpoint of another account is
// [ErrEndpointNotFound], exactly as one that does not exist.
func (s *Store) Endpoint(ctx context.Context, accountID, id string) (Endpoint, error) {
	if err := ValidateEndpointID(id); err != nil {
		return Endpoint{}, err
	}
	var row endpointRow
	err := s.pool.QueryRow(ctx, `SELECT `+endpointColumns("e")+` FROM webhook_endpoints e WHERE e.id = $1 AND e.account_id = $2`,
		id, accountID).Scan(row.targets()...)
	if errors.Is(err, pgx.ErrNoRows) {
		return Endpoint{}, fmt.Errorf("endpoint %s: %w", id, ErrEndpointNotFound)
	}
	if err != nil {
		return Endpoint{}, err
	}
	return row.endpoint(), nil
}

// DeleteEndpoint disables the account's endpoint: nothing is sent to it from now on (what was
// queued for it is cancelled; an attempt already under way ends as the receiver answers it,
// delivered on a 2xx); its row and its delivery log stay. Deleting it again answers ledgerdb.AlreadyApplied.
func (s *Store) DeleteEndpoint(ctx context.Context, accountID, id string) (Endpoint, ledgerdb.Outcome, error) {
	if _, err := s.Endpoint(ctx, accountID, id); err != nil {
		return Endpoint{}, "", err
	}
	var outcome string
	var row endpointRow
	err := s.pool.QueryRow(ctx, `SELECT r.outcome, `+endpointColumns("(r.endpoint)")+` FROM ledger_webhook_disable_endpoint($1) r`, id).
		Scan(append([]any{&outcome}, row.targets()...)...)
	if err != nil {
		return Endpoint{}, "", err
	}
	if outcome == "not_found" {
		return Endpoint{}, "", fmt.Errorf("endpoint %s: %w", id, ErrEndpointNotFound)
	}
	return row.endpoint(), ledgerdb.Outcome(outcome), nil
}

// RotateSecret gives the account's endpoint a new signing secret, answered this once; every
// attempt from now on is signed with it. A deleted endpoint is [ErrEndpointDisabled].
func (s *Store) RotateSecret(ctx context.Context, accountID, id string) (Created, error) {
	if _, err := s.Endpoint(ctx, accountID, id); err != nil {
		return Created{}, err
	}
	secret := NewSecret()
	var outcome string
	var row endpointRow
	err := s.pool.QueryRow(ctx, `SELECT r.outcome, `+endpointColumns("(r.endpoint)")+` FROM ledger_webhook_rotate_secret($1, $2) r`, id, secret).
		Scan(append([]any{&outcome}, row.targets()...)...)
	switch {
	case err != nil:
		return Created{}, err
	case outcome == "not_found":
		return Created{}, fmt.Errorf("endpoint %s: %w", id, ErrEndpointNotFound)
	case outcome == "disabled":
		return Created{}, fmt.Errorf("endpoint %s: %w", id, ErrEndpointDisabled)
	}
	return Created{Endpoint: row.endpoint(), Secret: secret}, nil
}

// SetLowBalanceThreshold sets the account's low-balance threshold: a debit that takes the balance
// from at or above it to below it writes a balance.low event. nil removes it. The same threshold
// again answers ledgerdb.AlreadyApplied; an unknown account is [ledgerdb.ErrUnknownAccount].
func (s *Store) SetLowBalanceThreshold(ctx context.Context, accountID string, threshold *int64) (ledgerdb.Outcome, error) {
	if err := ledgerdb.ValidateID("account_id", accountID); err != nil {
		return "", err
	}
	if threshold != nil && (*threshold < -ledgerdb.MaxBalance || *threshold > ledgerdb.MaxBalance) {
		return "", &ledgerdb.InvalidInputError{Field: "threshold", Reason: fmt.Sprintf("is %d; it must be between -%d and %d", *threshold, ledgerdb.MaxBalance, ledgerdb.MaxBalance)}
	}
	var outcome string
	if err := s.pool.QueryRow(ctx, `SELECT ledger_webhook_set_low_balance($1, $2)`, accountID, threshold).Scan(&outcome); err != nil {
		return "", err
	}
	if outcome == "unknown_account" {
		return "", fmt.Errorf("account %q: %w", accountID, ledgerdb.ErrUnknownAccount)
	}
	return ledgerdb.Outcome(outcome), nil
}

// LowBalanceThreshold answers the account's threshold; nil when it has none.
func (s *Store) LowBalanceThreshold(ctx context.Context, accountID string) (*int64, error) {
	var t int64
	err := s.pool.QueryRow(ctx, `SELECT threshold FROM webhook_low_balance WHERE account_id = $1`, accountID).Scan(&t)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return &t, nil
}

// Event is one money transition (or low balance) as it is sent.
type Event struct {
	// ID is the webhook-id of every delivery of the event ("msg_…").
	ID string `json:"id"`
	// Seq orders every event of the ledger.
	Seq int64 `json:"seq"`
	// AccountID is the account it is about.
	AccountID string `json:"account_id"`
	// JobID is the client's job ID, for a job's event.
	JobID string `json:"job_id,omitempty"`
	// Type is job.charged, job.rejected, job.delivered, job.refunded, job.reclaimed, balance.low,
	// credit.granted, credit.expired or topup.requested.
	Type string `json:"type"`
	// Data is the event's payload: the job's money figures, the balance and the threshold, or the
	// credit block's.
	Data json.RawMessage `json:"data"`
	// CreatedAt is when its transition was made: its transaction's time, as its ledger row says.
	CreatedAt time.Time `json:"created_at"`
}

// Events answers the account's events derived so far (Derive; only while the account has an
// endpoint, or by a replay) after the sequence number after (0: from the first), in order, at
// most limit (1 to 1000).
func (s *Store) Events(ctx context.Context, accountID string, after int64, limit int) ([]Event, error) {
	if limit < 1 || limit > 1000 {
		return nil, &ledgerdb.InvalidInputError{Field: "limit", Reason: "must be from 1 to 1000"}
	}
	rows, err := s.pool.Query(ctx, `SELECT ev.id, ev.seq, ev.account_id, coalesce(substr(ev.job_id, char_length(ev.account_id) + 2), ''),
			ev.type, ev.payload, ev.created_at
		FROM webhook_events ev WHERE ev.account_id = $1 AND ev.seq > $2 ORDER BY ev.seq LIMIT $3`, accountID, after, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Event{}
	for rows.Next() {
		var e Event
		if err := rows.Scan(&e.ID, &e.Seq, &e.AccountID, &e.JobID, &e.Type, &e.Data, &e.CreatedAt); err != nil {
			return nil, err
		}
		e.CreatedAt = e.CreatedAt.UTC()
		out = append(out, e)
	}
	return out, rows.Err()
}

// Attempt is one row of an endpoint's delivery log.
type Attempt struct {
	// ID orders the log; pass the last one as before for an older page.
	ID int64 `json:"id"`
	// EventID names the event sent ("msg_…").
	EventID string `json:"event_id"`
	// EventType is the event's type.
	EventType string `json:"event_type"`
	// Attempt counts the attempts of this delivery, from 1.
	Attempt int `json:"attempt"`
	// AttemptedAt is when the attempt ended.
	AttemptedAt time.Time `json:"attempted_at"`
	// HTTPStatus is what the receiver answered; absent when it could not be reached.
	HTTPStatus *int `json:"http_status,omitempty"`
	// Error says why the attempt failed, when it did.
	Error string `json:"error,omitempty"`
	// DurationMS is how long the attempt took, in milliseconds.
	DurationMS int `json:"duration_ms"`
	// Outcome is delivered, retry (due again at NextAttemptAt) or failed (given up).
	Outcome string `json:"outcome"`
	// NextAttemptAt is when the delivery is due again, after a retry.
	NextAttemptAt *time.Time `json:"next_attempt_at,omitempty"`
}

// Attempts answers the newest entries of the account's endpoint's delivery log, newest first, at
// most limit (1 to 1000), older than the entry before when it is above 0.
func (s *Store) Attempts(ctx context.Context, accountID, endpointID string, before int64, limit int) ([]Attempt, error) {
	if limit < 1 || limit > 1000 {
		return nil, &ledgerdb.InvalidInputError{Field: "limit", Reason: "must be from 1 to 1000"}
	}
	if _, err := s.Endpoint(ctx, accountID, endpointID); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT a.id, ev.id, ev.type, a.attempt, a.attempted_at, a.http_status, coalesce(a.error, ''),
			a.duration_ms, a.outcome, a.next_attempt_at
		FROM webhook_attempts a JOIN webhook_events ev ON ev.seq = a.event_seq
		WHERE a.endpoint_id = $1 AND ($2 = 0 OR a.id < $2) ORDER BY a.id DESC LIMIT $3`, endpointID, before, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Attempt{}
	for rows.Next() {
		var a Attempt
		if err := rows.Scan(&a.ID, &a.EventID, &a.EventType, &a.Attempt, &a.AttemptedAt, &a.HTTPStatus, &a.Error,
			&a.DurationMS, &a.Outcome, &a.NextAttemptAt); err != nil {
			return nil, err
		}
		a.AttemptedAt = a.AttemptedAt.UTC()
		if a.NextAttemptAt != nil {
			t := a.NextAttemptAt.UTC()
			a.NextAttemptAt = &t
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// Replay is what to send an endpoint again: one event, or every event of its account since a time.
type Replay struct {
	// EventID names the one event ("msg_…").
	EventID string
	// Since sends every event created at or after it.
	Since *time.Time
}

// Replay queues events of the account to its endpoint again — due at once, with a new round of
// max age — and answers how many deliveries were queued (a delivery still pending stays as it
// is). An event ID no event of the account has is [ErrUnknownEvent]; a deleted endpoint,
// [ErrEndpointDisabled]; nothing written either way.
func (s *Store) Replay(ctx context.Context, accountID, endpointID string, r Replay) (int, error) {
	if (r.EventID == "") == (r.Since == nil) {
		return 0, &ledgerdb.InvalidInputError{Field: "replay", Reason: "give event_id or since, not both or neither"}
	}
	var eventID *string
	if r.EventID != "" {
		if err := ValidateEventID(r.EventID); err != nil {
			return 0, err
		}
		eventID = &r.EventID
	}
	if _, err := s.Endpoint(ctx, accountID, endpointID); err != nil {
		return 0, err
	}
	var outcome string
	var n int
	err := ledgerdb.ResendOnDeadlock(func() error { // it may meet a derive pass on a job's events
		return s.pool.QueryRow(ctx, `SELECT outcome, queued FROM ledger_webhook_replay($1, $2, $3)`, endpointID, eventID, r.Since).Scan(&outcome, &n)
	})
	if err != nil {
		return 0, refusal(err)
	}
	switch outcome {
	case "not_found":
		return 0, fmt.Errorf("endpoint %s: %w", endpointID, ErrEndpointNotFound)
	case "disabled":
		return 0, fmt.Errorf("endpoint %s: %w", endpointID, ErrEndpointDisabled)
	case "unknown_event":
		return 0, fmt.Errorf("event %s: %w", r.EventID, ErrUnknownEvent)
	}
	return n, nil
}

// Failure is a delivery given up after max age: the event did not reach the endpoint.
type Failure struct {
	// EndpointID and AccountID name the endpoint and its account.
	EndpointID string `json:"endpoint_id"`
	AccountID  string `json:"account_id"`
	// EventID and EventType name the event; JobID its job, if it is a job's.
	EventID   string `json:"event_id"`
	EventType string `json:"event_type"`
	JobID     string `json:"job_id,omitempty"`
	// Attempts is how many attempts were made.
	Attempts int `json:"attempts"`
	// FailedAt is when it was given up.
	FailedAt time.Time `json:"failed_at"`
}

// Failures answers the deliveries given up, newest first, at most limit (1 to 1000), of one account
// or, with accountID empty, of every account: what an operator looks at before replaying.
func (s *Store) Failures(ctx context.Context, accountID string, limit int) ([]Failure, error) {
	if limit < 1 || limit > 1000 {
		return nil, &ledgerdb.InvalidInputError{Field: "limit", Reason: "must be from 1 to 1000"}
	}
	if accountID != "" {
		if err := ledgerdb.ValidateID("account_id", accountID); err != nil {
			return nil, err
		}
	}
	rows, err := s.pool.Query(ctx, `SELECT d.endpoint_id, e.account_id, ev.id, ev.type,
			coalesce(substr(ev.job_id, char_length(ev.account_id) + 2), ''), d.attempts, d.finished_at
		FROM webhook_deliveries d JOIN webhook_endpoints e ON e.id = d.endpoint_id JOIN webhook_events ev ON ev.seq = d.event_seq
		WHERE d.status = 'failed' AND ($1 = '' OR e.account_id = $1)
		ORDER BY d.finished_at DESC LIMIT $2`, accountID, limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []Failure{}
	for rows.Next() {
		var f Failure
		if err := rows.Scan(&f.EndpointID, &f.AccountID, &f.EventID, &f.EventType, &f.JobID, &f.Attempts, &f.FailedAt); err != nil {
			return nil, err
		}
		f.FailedAt = f.FailedAt.UTC()
		out = append(out, f)
	}
	return out, rows.Err()
}

// JobDelivery is where one of a job's events stands at one endpoint of its account.
type JobDelivery struct {
	// EventID and EventType name the event; CreatedAt is when it was derived.
	EventID   string
	EventType string
	CreatedAt time.Time
	// EndpointID and EndpointURL name the endpoint it is sent to.
	EndpointID  string
	EndpointURL string
	// Attempts is how many attempts were made so far.
	Attempts int
	// Status is pending (due again), delivered, failed (given up) or cancelled (its endpoint was
	// deleted).
	Status string
	// LastHTTPStatus is what the receiver answered the last attempt; nil before one, or when it
	// could not be reached.
	LastHTTPStatus *int
}

// JobDeliveries answers the deliveries of the job's events, oldest event first: what its account
// was told about it, and whether that arrived. A job with no event, or whose account has no
// endpoint, has none.
func (s *Store) JobDeliveries(ctx context.Context, key ledgerdb.JobKey) ([]JobDelivery, error) {
	if err := key.Validate(); err != nil {
		return nil, err
	}
	rows, err := s.pool.Query(ctx, `SELECT ev.id, ev.type, ev.created_at, e.id, e.url, d.attempts, d.status,
			(SELECT a.http_status FROM webhook_attempts a WHERE a.endpoint_id = d.endpoint_id AND a.event_seq = d.event_seq
				ORDER BY a.id DESC LIMIT 1)
		FROM webhook_events ev JOIN webhook_deliveries d ON d.event_seq = ev.seq JOIN webhook_endpoints e ON e.id = d.endpoint_id
		WHERE ev.job_id = $1 ORDER BY ev.seq, e.id`, key.String())
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := []JobDelivery{}
	for rows.Next() {
		var d JobDelivery
		if err := rows.Scan(&d.EventID, &d.EventType, &d.CreatedAt, &d.EndpointID, &d.EndpointURL, &d.Attempts, &d.Status,
			&d.LastHTTPStatus); err != nil {
			return nil, err
		}
		d.CreatedAt = d.CreatedAt.UTC()
		out = append(out, d)
	}
	return out, rows.Err()
}
