package webhooks_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/metrics"
	"github.com/jobbill/jobbill/webhooks"
)

// TestDeliveryOutlastsAnOutageInOrder checks delivery's guarantees against a real receiver over
// HTTP: while the receiver is down (500s and dropped connections) nothing is lost; once it is back
// it gets every event, each signed so that the Standard Webhooks verifier accepts it, each job's
// events in order (a later one waits for the earlier), with three workers delivering together.
// The delivery log records the failed attempts with their status or error and the success.
func TestDeliveryOutlastsAnOutageInOrder(t *testing.T) {
	ctx := context.Background()
	s, ws, acct, rcv, ep := hooked(t, 100000)
	rcv.down.Store(true)

	runWorkers(t, testOptions(ws, acct), 3)
	lifecycle(t, s, acct, ledgertest.Metered(t, s, 2, 10), 8)
	require.Eventually(t, func() bool { return rcv.calls.Load() >= 12 }, 10*time.Second, 10*time.Millisecond, "attempts while down")
	require.Empty(t, rcv.received())
	rcv.down.Store(false)
	waitDelivered(t, s, ep.ID)

	evs := events(t, ws, acct)
	require.Len(t, evs, 8*2+4)
	requireInOrderPerJob(t, evs, rcv.received())

	log, err := ws.Attempts(ctx, acct, ep.ID, 0, 1000)
	require.NoError(t, err)
	outcomes := map[string]int{}
	for _, a := range log {
		outcomes[a.Outcome]++
		switch a.Outcome {
		case "retry":
			require.NotEmpty(t, a.Error)
			require.NotNil(t, a.NextAttemptAt)
			if a.HTTPStatus != nil {
				require.Equal(t, 500, *a.HTTPStatus)
			}
		case "delivered":
			require.Equal(t, 204, *a.HTTPStatus)
		}
	}
	require.Equal(t, len(evs), outcomes["delivered"])
	require.Positive(t, outcomes["retry"])
	require.Zero(t, outcomes["failed"])
}

// TestSignatureRefusesForgeryAndLateReplay checks the trust a receiver puts in a delivery: the
// signature verifies with the endpoint's secret and the library's verifier; a forged signature, a
// body changed in transit, another endpoint's secret, and the same request replayed after the
// verifier's five-minute tolerance all fail verification.
func TestSignatureRefusesForgeryAndLateReplay(t *testing.T) {
	ctx := context.Background()
	s, ws, acct, rcv, ep := hooked(t, 1000)
	lifecycle(t, s, acct, ledgertest.Fixed(t, s, 10), 1)
	caughtUp(t, ws)
	_, err := webhooks.NewWorker(testOptions(ws, acct)).RunOnce(ctx)
	require.NoError(t, err)
	got := rcv.received()
	require.NotEmpty(t, got)
	r := got[0]
	require.Equal(t, "job.charged", r.msg.Type)
	require.NoError(t, webhooks.Verify(ep.Secret, r.header, r.body))

	forged := r.header.Clone()
	forged.Set(webhooks.HeaderSignature, "v1,"+"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=")
	require.ErrorIs(t, webhooks.Verify(ep.Secret, forged, r.body), standardwebhooks.ErrNoMatchingSignature)

	tampered := []byte(string(r.body[:len(r.body)-1]) + " }")
	require.ErrorIs(t, webhooks.Verify(ep.Secret, r.header, tampered), standardwebhooks.ErrNoMatchingSignature)

	require.ErrorIs(t, webhooks.Verify(webhooks.NewSecret(), r.header, r.body), standardwebhooks.ErrNoMatchingSignature)

	// Replayed too late: the same ID and body, correctly signed, but stamped ten minutes ago.
	late := http.Header{}
	require.NoError(t, webhooks.Sign(late, ep.Secret, r.id, time.Now().Add(-10*time.Minute), r.body))
	require.ErrorIs(t, webhooks.Verify(ep.Secret, late, r.body), standardwebhooks.ErrMessageTooOld)
	// ...and one from the future, likewise.
	early := http.Header{}
	require.NoError(t, webhooks.Sign(early, ep.Secret, r.id, time.Now().Add(10*time.Minute), r.body))
	require.ErrorIs(t, webhooks.Verify(ep.Secret, early, r.body), standardwebhooks.ErrMessageTooNew)
}

// TestSignatureMatchesTheSpecVector checks the signing scheme against the Standard Webhooks
// specification's published example: secret, message ID, timestamp and body give exactly its
// signature.
func TestSignatureMatchesTheSpecVector(t *testing.T) {
	h := http.Header{}
	body := []byte(`{"test": 2432232314}`)
	require.NoError(t, webhooks.Sign(h, "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "msg_p5jXN8AQM9LWM0D4loKWxJek", time.Unix(1614265330, 0), body))
	require.Equal(t, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=", h.Get(webhooks.HeaderSignature))
	require.Equal(t, "1614265330", h.Get(webhooks.HeaderTimestamp))
	require.Equal(t, "msg_p5jXN8AQM9LWM0D4loKWxJek", h.Get(webhooks.HeaderID))
}

// TestWorkersClaimEachDeliveryOnce checks that several workers deliver together safely, under real
// concurrency: six workers claiming from the same queue at once send each of many events exactly
// once (no two claim the same delivery) and each job's events in order.
func TestWorkersClaimEachDeliveryOnce(t *testing.T) {
	s, ws, acct, rcv, ep := hooked(t, 1000000)
	lifecycle(t, s, acct, ledgertest.Fixed(t, s, 5), 40)
	opts := testOptions(ws, acct)
	opts.BatchSize = 3
	stop := runWorkers(t, opts, 6)
	waitDelivered(t, s, ep.ID)
	stop()

	evs := events(t, ws, acct)
	got := rcv.received()
	require.Len(t, got, len(evs), "each event exactly once")
	requireInOrderPerJob(t, evs, got)
}

// TestGivenUpAfterMaxAgeThenTheJobMovesOn checks the retry bound: a receiver that never accepts a
// delivery is retried with backoff until max age has passed, then the delivery is marked failed —
// logged in the delivery log, listed among the failures and counted on the metrics page — and the
// job's later event, which waited behind it, is sent, and retried for a max age of its own counted
// from when it could be sent (the earlier one given up), not from when it was written: waiting in
// line uses up none of its retries.
func TestGivenUpAfterMaxAgeThenTheJobMovesOn(t *testing.T) {
	ctx := context.Background()
	s, ws, acct, rcv, ep := hooked(t, 1000)
	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))
	applied(t, ledgerdb.Applied)(s.Settle(ctx, job, 1, nil, "out://x"))

	rcv.down.Store(true)
	cfg := testOptions(ws, acct)
	// Long enough, against backoffs of 80 ms at most, that the first attempt is surely retried
	// before max age passes, however slowly a loaded machine makes it.
	cfg.MaxAge = 2 * time.Second
	m := metrics.New()
	cfg.Metrics = m
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- webhooks.NewWorker(cfg).Run(runCtx) }()
	waitDelivered(t, s, ep.ID)
	stop()
	require.NoError(t, <-done)

	// Counted on the worker's metrics page, where an operator alerts on them.
	require.NoError(t, m.Close())
	page := httptest.NewRecorder()
	m.Handler().ServeHTTP(page, httptest.NewRequest("GET", "/metrics", nil))
	require.Contains(t, page.Body.String(), `jobbill_webhook_attempts_total{outcome="failed"} 2`)
	require.Contains(t, page.Body.String(), `jobbill_webhook_attempts_total{outcome="retry"}`)

	log, err := ws.Attempts(ctx, acct, ep.ID, 0, 1000)
	require.NoError(t, err)
	var failed []webhooks.Attempt
	for _, a := range log {
		if a.Outcome == "failed" {
			failed = append(failed, a)
		}
	}
	require.Len(t, failed, 2, "both events given up: the later one was sent once the earlier was")
	require.Equal(t, "job.delivered", failed[0].EventType, "newest first")
	require.Equal(t, "job.charged", failed[1].EventType)
	require.Nil(t, failed[0].NextAttemptAt)
	require.Greater(t, len(log), 2, "retried before giving up")
	failures, err := ws.Failures(ctx, acct, 10)
	require.NoError(t, err)
	require.Len(t, failures, 2, "visible to operators")
	require.Equal(t, job.JobID, failures[0].JobID)

	// The later event was first tried after the earlier one was given up, and given up only once
	// its next try would have come more than max age after that: no sooner than max age less the
	// longest backoff. The database's clock, which decides, is read on both sides.
	givenUp := map[string]time.Time{}
	rows, err := s.Pool().Query(ctx, `SELECT ev.type, d.finished_at FROM webhook_deliveries d
		JOIN webhook_events ev ON ev.seq = d.event_seq WHERE d.endpoint_id = $1 AND d.status = 'failed'`, ep.ID)
	require.NoError(t, err)
	for rows.Next() {
		var typ string
		var at time.Time
		require.NoError(t, rows.Scan(&typ, &at))
		givenUp[typ] = at
	}
	require.NoError(t, rows.Err())
	for _, a := range log {
		if a.EventType == "job.delivered" {
			require.True(t, a.AttemptedAt.After(givenUp["job.charged"]), "the later event is tried only after the earlier is given up")
		}
	}
	waited := givenUp["job.delivered"].Sub(givenUp["job.charged"])
	require.Greater(t, waited, cfg.MaxAge-cfg.MaxBackoff, "the later event is retried for its own max age, from when it could be sent")
}

// TestReplayResendsUnderTheSameID checks replay: one event, or every event since a time, is sent
// to the endpoint again under its own webhook-id (so the receiver recognises the duplicate), and a
// replay since a time derives the events no pass wrote since then (the set-up's grant); an
// event of another account, a deleted endpoint and a request naming neither or both are refused
// with nothing queued.
func TestReplayResendsUnderTheSameID(t *testing.T) {
	ctx := context.Background()
	s, ws, acct, rcv, ep := hooked(t, 1000)
	start := time.Now().Add(-time.Second)
	lifecycle(t, s, acct, ledgertest.Fixed(t, s, 10), 2)
	w := webhooks.NewWorker(testOptions(ws, acct))
	drain := func() {
		caughtUp(t, ws)
		for {
			n, err := w.RunOnce(ctx)
			require.NoError(t, err)
			if n == 0 && pendingOf(t, s, ep.ID) == 0 {
				return
			}
		}
	}
	drain()
	evs := events(t, ws, acct)
	require.Len(t, rcv.received(), len(evs))

	n, err := ws.Replay(ctx, acct, ep.ID, webhooks.Replay{EventID: evs[1].ID})
	require.NoError(t, err)
	require.Equal(t, 1, n)
	drain()
	got := rcv.received()
	require.Len(t, got, len(evs)+1)
	require.Equal(t, evs[1].ID, got[len(got)-1].id, "the same webhook-id: a recognisable duplicate")

	// Since a time before the set-up's grant, which no pass derived (it was read before the
	// endpoint): the replay derives its credit.granted and sends it with the rest.
	n, err = ws.Replay(ctx, acct, ep.ID, webhooks.Replay{Since: &start})
	require.NoError(t, err)
	sent := len(evs) + 1
	evs = events(t, ws, acct)
	require.Equal(t, "credit.granted", evs[len(evs)-1].Type, "derived by the replay, after the jobs' events")
	require.Equal(t, len(evs), n)
	drain()
	require.Len(t, rcv.received(), sent+len(evs))
	requireInOrderPerJob(t, evs, rcv.received()[sent:])

	other := ledgertest.Account(t, s, 100)
	listening(t, ws, other)
	lifecycle(t, s, other, ledgertest.Fixed(t, s, 10), 1)
	_, err = ws.Replay(ctx, acct, ep.ID, webhooks.Replay{EventID: events(t, ws, other)[0].ID})
	require.ErrorIs(t, err, webhooks.ErrUnknownEvent)
	_, err = ws.Replay(ctx, other, ep.ID, webhooks.Replay{EventID: evs[0].ID})
	require.ErrorIs(t, err, webhooks.ErrEndpointNotFound, "another account's endpoint is not found")
	var invalid *ledgerdb.InvalidInputError
	_, err = ws.Replay(ctx, acct, ep.ID, webhooks.Replay{})
	require.ErrorAs(t, err, &invalid)
	_, err = ws.Replay(ctx, acct, ep.ID, webhooks.Replay{EventID: evs[0].ID, Since: &start})
	require.ErrorAs(t, err, &invalid)
	_, err = ws.Replay(ctx, acct, ep.ID, webhooks.Replay{EventID: "msg_nothex"})
	require.ErrorAs(t, err, &invalid)

	_, out, err := ws.DeleteEndpoint(ctx, acct, ep.ID)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.Applied, out)
	_, err = ws.Replay(ctx, acct, ep.ID, webhooks.Replay{EventID: evs[0].ID})
	require.ErrorIs(t, err, webhooks.ErrEndpointDisabled)
	require.Zero(t, pendingOf(t, s, ep.ID))
}

// heldReceiver is a receiver that holds every request until release is closed, then answers
// status: arrived gets one value per request as it comes in, so that a test acts while an attempt
// is in flight.
func heldReceiver(t *testing.T, status int) (srv *httptest.Server, arrived <-chan struct{}, release chan struct{}) {
	t.Helper()
	release = make(chan struct{})
	in := make(chan struct{}, 10)
	srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		in <- struct{}{}
		<-release
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv, in, release
}

// TestStopLetsAttemptsInFlightFinish checks a clean stop: a worker told to stop while an attempt
// is under way lets it finish and records it, then returns.
func TestStopLetsAttemptsInFlightFinish(t *testing.T) {
	s, ws := stores(t)
	acct := account(t, s, ws, 1000)
	srv, arrived, release := heldReceiver(t, http.StatusOK)
	ep, err := ws.CreateEndpoint(context.Background(), webhooks.EndpointSpec{AccountID: acct, URL: srv.URL}, webhooks.URLPolicy{AllowPrivate: true})
	require.NoError(t, err)
	chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- webhooks.NewWorker(testOptions(ws, acct)).Run(ctx) }()
	<-arrived
	cancel()
	select {
	case <-done:
		t.Fatal("the worker returned with an attempt in flight")
	case <-time.After(100 * time.Millisecond):
	}
	close(release)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(5 * time.Second):
		t.Fatal("the worker did not stop")
	}
	require.Zero(t, pendingOf(t, s, ep.ID), "the attempt in flight was recorded as delivered")
}

// TestDeadWorkersDeliveryIsSentAgain checks at-least-once across a worker's death: a delivery
// claimed by a worker that never reports back (it died mid-send) is sent again by another worker
// once the lease runs out, under the same webhook-id, and logged as the second attempt; while the
// lease holds, no other worker sends it.
func TestDeadWorkersDeliveryIsSentAgain(t *testing.T) {
	ctx := context.Background()
	s, ws, acct, rcv, ep := hooked(t, 100)
	chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))

	caughtUp(t, ws)
	// The dead worker: it claims with a short lease and is never heard of again. The lease is
	// long enough that the look below surely comes while it holds, however loaded the machine.
	var claimed int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM ledger_webhook_claim(10, '2 seconds', $1)`, []string{acct}).Scan(&claimed))
	require.Equal(t, 1, claimed)
	w := webhooks.NewWorker(testOptions(ws, acct))
	n, err := w.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "leased to the dead worker")

	time.Sleep(2050 * time.Millisecond)
	n, err = w.RunOnce(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	got := rcv.received()
	require.Len(t, got, 1)
	require.Equal(t, events(t, ws, acct)[0].ID, got[0].id)
	log, err := ws.Attempts(ctx, acct, ep.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Equal(t, 2, log[0].Attempt, "the dead worker's claim counted as an attempt")
	require.Equal(t, "delivered", log[0].Outcome)
}

// TestDeletedEndpointReceivesNothing checks that deleting an endpoint stops its deliveries at
// once — those already queued are cancelled — and that events of transitions after it are not
// queued to it: with no endpoint left, the account's later events are not even derived.
func TestDeletedEndpointReceivesNothing(t *testing.T) {
	ctx := context.Background()
	s, ws, acct, rcv, ep := hooked(t, 100)
	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))
	caughtUp(t, ws)
	_, _, err := ws.DeleteEndpoint(ctx, acct, ep.ID)
	require.NoError(t, err)
	applied(t, ledgerdb.Applied)(s.Settle(ctx, job, 1, nil, "out://x"))
	caughtUp(t, ws)

	n, err := webhooks.NewWorker(testOptions(ws, acct)).RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Empty(t, rcv.received())
	require.Zero(t, pendingOf(t, s, ep.ID))
	var cancelled int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM webhook_deliveries WHERE endpoint_id = $1 AND status = 'cancelled'`, ep.ID).Scan(&cancelled))
	require.Equal(t, 1, cancelled, "the charge's delivery is cancelled; the settle's was never queued")
	require.Len(t, events(t, ws, acct), 1, "the settle's event is not derived: no endpoint of the account wants it")
}

// statusOf answers what became of the event's delivery to the endpoint: pending, delivered, failed
// or cancelled.
func statusOf(t *testing.T, s *ledgerdb.Store, endpointID, eventID string) string {
	t.Helper()
	var status string
	require.NoError(t, s.Pool().QueryRow(context.Background(), `SELECT d.status FROM webhook_deliveries d
		JOIN webhook_events ev ON ev.seq = d.event_seq WHERE d.endpoint_id = $1 AND ev.id = $2`, endpointID, eventID).Scan(&status))
	return status
}

// TestEndpointDeletedMidAttemptKeepsWhatTheAttemptEarned checks at least once as the ledger tells
// it: an attempt in flight when its endpoint is deleted, which the receiver then takes (2xx),
// leaves its delivery delivered — the event reached the customer, as the delivery log says — not
// cancelled beside a delivered attempt; one the receiver refuses leaves its delivery cancelled,
// never retried. Both endpoints receive nothing more.
func TestEndpointDeletedMidAttemptKeepsWhatTheAttemptEarned(t *testing.T) {
	ctx := context.Background()
	s, ws := stores(t)
	acct := account(t, s, ws, 1000)
	taking, takingArrived, releaseTaking := heldReceiver(t, http.StatusOK)
	refusing, refusingArrived, releaseRefusing := heldReceiver(t, http.StatusServiceUnavailable)
	endpoint := func(url string) webhooks.Created {
		ep, err := ws.CreateEndpoint(ctx, webhooks.EndpointSpec{AccountID: acct, URL: url}, webhooks.URLPolicy{AllowPrivate: true})
		require.NoError(t, err)
		return ep
	}
	took, refused := endpoint(taking.URL), endpoint(refusing.URL)
	job := chargedJob(t, s, acct, ledgertest.Fixed(t, s, 10))
	charged := events(t, ws, acct)[0]

	w := webhooks.NewWorker(testOptions(ws, acct))
	done := make(chan error, 1)
	go func() {
		n, err := w.RunOnce(ctx)
		if err == nil && n != 2 {
			err = fmt.Errorf("claimed %d deliveries, want 2", n)
		}
		done <- err
	}()
	// Both attempts are at their receivers, unanswered, when the endpoints are deleted.
	<-takingArrived
	<-refusingArrived
	for _, ep := range []webhooks.Created{took, refused} {
		_, out, err := ws.DeleteEndpoint(ctx, acct, ep.ID)
		require.NoError(t, err)
		require.Equal(t, ledgerdb.Applied, out)
		require.Equal(t, "cancelled", statusOf(t, s, ep.ID, charged.ID), "nothing queued is sent once deleted")
	}
	close(releaseTaking)
	close(releaseRefusing)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-time.After(20 * time.Second):
		t.Fatal("the attempts in flight were never recorded")
	}

	require.Equal(t, "delivered", statusOf(t, s, took.ID, charged.ID), "the receiver took it: delivered, as its attempt says")
	log, err := ws.Attempts(ctx, acct, took.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Equal(t, "delivered", log[0].Outcome)
	require.Equal(t, "cancelled", statusOf(t, s, refused.ID, charged.ID), "refused after the deletion: cancelled, not retried")
	log, err = ws.Attempts(ctx, acct, refused.ID, 0, 10)
	require.NoError(t, err)
	require.Len(t, log, 1)
	require.Nil(t, log[0].NextAttemptAt, "no attempt is due again")

	applied(t, ledgerdb.Applied)(s.Settle(ctx, job, 1, nil, "out://x"))
	caughtUp(t, ws)
	n, err := w.RunOnce(ctx)
	require.NoError(t, err)
	require.Zero(t, n, "deleted endpoints receive nothing more")
	require.Zero(t, pendingOf(t, s, took.ID)+pendingOf(t, s, refused.ID))
}
