package client_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/client"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func tracked(state client.SubmissionState, resubmissions int, withBody bool) client.Tracked {
	t := client.Tracked{CreatedAt: created, State: state, Resubmissions: resubmissions}
	if withBody {
		t.Request = client.JobRequest{JobID: "render-1", AccountID: "acme", Cost: 40, InputRef: "sim:ok"}
	}
	return t
}

// TestOnNotFoundFollowsTheTable checks every row of the 404 table of the submission rules (money rule 7: an
// ID that was accepted is never charged again — a 404 for it means deleted, never resubmit; an
// ID never accepted is resubmitted under the same ID, at most 3 times, within 5 minutes).
func TestOnNotFoundFollowsTheTable(t *testing.T) {
	soon := created.Add(time.Minute)
	late := created.Add(client.ConfirmWindow)
	for _, tc := range []struct {
		name string
		t    client.Tracked
		now  time.Time
		want client.Action
	}{
		{"accepted once: deleted", tracked(client.Accepted, 0, true), soon, client.Deleted},
		{"accepted once, even with budget left and past the window: deleted", tracked(client.Accepted, 0, true), late, client.Deleted},
		{"never accepted, body, 0 resubmissions: resubmit", tracked(client.Unknown, 0, true), soon, client.Resubmit},
		{"never accepted, body, 2 resubmissions: resubmit", tracked(client.Unknown, 2, true), soon, client.Resubmit},
		{"never accepted, body, 3 resubmissions: wait", tracked(client.Unknown, 3, true), soon, client.Wait},
		{"never accepted, no body: wait", tracked(client.Unknown, 0, false), soon, client.Wait},
		{"never accepted, 5 minutes after creation: not received", tracked(client.Unknown, 0, true), late, client.NotReceived},
		{"never accepted, budget used, past the window: not received", tracked(client.Unknown, 3, true), late.Add(time.Hour), client.NotReceived},
		{"never accepted, just inside the window: resubmit", tracked(client.Unknown, 1, true), late.Add(-time.Nanosecond), client.Resubmit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, client.OnNotFound(tc.t, tc.now))
		})
	}
}

// TestDecideCoversEveryAnswer checks the polling rule for every kind of answer (money
// rule 7 and 8): transient failures and unsettled states keep polling the same ID and never
// create a new paid job; 410 is deleted; 404 goes through the seed's table.
func TestDecideCoversEveryAnswer(t *testing.T) {
	now := created.Add(time.Minute)
	unknown := tracked(client.Unknown, 0, true)
	accepted := tracked(client.Accepted, 0, true)
	for _, tc := range []struct {
		name string
		t    client.Tracked
		obs  client.Observation
		want client.Action
	}{
		{"network error", accepted, client.Observation{Err: errors.New("connection reset")}, client.KeepPolling},
		{"network error while unknown", unknown, client.Observation{Err: errors.New("timeout")}, client.KeepPolling},
		{"408", accepted, client.Observation{StatusCode: 408}, client.KeepPolling},
		{"429", accepted, client.Observation{StatusCode: 429}, client.KeepPolling},
		{"500", accepted, client.Observation{StatusCode: 500}, client.KeepPolling},
		{"502", unknown, client.Observation{StatusCode: 502}, client.KeepPolling},
		{"503", accepted, client.Observation{StatusCode: 503}, client.KeepPolling},
		{"504", accepted, client.Observation{StatusCode: 504}, client.KeepPolling},
		{"200 submitting", unknown, client.Observation{StatusCode: 200, State: "submitting"}, client.KeepPolling},
		{"200 unknown state", accepted, client.Observation{StatusCode: 200, State: "quantum"}, client.KeepPolling},
		{"200 empty state", accepted, client.Observation{StatusCode: 200}, client.KeepPolling},
		{"200 running", accepted, client.Observation{StatusCode: 200, State: "running"}, client.KeepPolling},
		{"200 delivered", accepted, client.Observation{StatusCode: 200, State: "delivered"}, client.Done},
		{"200 recovered", accepted, client.Observation{StatusCode: 200, State: "recovered"}, client.Done},
		{"200 refunded", accepted, client.Observation{StatusCode: 200, State: "refunded"}, client.Done},
		{"200 rejected", accepted, client.Observation{StatusCode: 200, State: "rejected"}, client.Done},
		{"200 deleted", accepted, client.Observation{StatusCode: 200, State: "deleted"}, client.Deleted},
		{"410", accepted, client.Observation{StatusCode: 410}, client.Deleted},
		{"410 while unknown", unknown, client.Observation{StatusCode: 410}, client.Deleted},
		{"404 accepted", accepted, client.Observation{StatusCode: 404}, client.Deleted},
		{"404 unknown", unknown, client.Observation{StatusCode: 404}, client.Resubmit},
		{"400", accepted, client.Observation{StatusCode: 400}, client.Fail},
		{"401", accepted, client.Observation{StatusCode: 401}, client.Fail},
		{"403", accepted, client.Observation{StatusCode: 403}, client.Fail},
		{"409", accepted, client.Observation{StatusCode: 409}, client.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, client.Decide(tc.t, tc.obs, now))
		})
	}
}
