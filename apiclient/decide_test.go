package apiclient_test

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apiclient"
)

var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func tracked(state apiclient.SubmissionState, resubmissions int, withBody bool) apiclient.Tracked {
	t := apiclient.Tracked{CreatedAt: created, State: state, Resubmissions: resubmissions}
	if withBody {
		t.Request = apiclient.JobRequest{JobID: "render-1", AccountID: "acme", Kind: "render-4k", InputRef: "sim:ok"}
	}
	return t
}

// TestOnNotFoundFollowsTheTable checks every row of the 404 table of the submission rules (money rule 7: an
// ID that was accepted is never charged again — a 404 for it means deleted, never resubmit; an
// ID never accepted is resubmitted under the same ID, at most 3 times, within 5 minutes).
func TestOnNotFoundFollowsTheTable(t *testing.T) {
	soon := created.Add(time.Minute)
	late := created.Add(apiclient.ConfirmWindow)
	for _, tc := range []struct {
		name string
		t    apiclient.Tracked
		now  time.Time
		want apiclient.Action
	}{
		{"accepted once: deleted", tracked(apiclient.Accepted, 0, true), soon, apiclient.Deleted},
		{"accepted once, even with budget left and past the window: deleted", tracked(apiclient.Accepted, 0, true), late, apiclient.Deleted},
		{"never accepted, body, 0 resubmissions: resubmit", tracked(apiclient.Unknown, 0, true), soon, apiclient.Resubmit},
		{"never accepted, body, 2 resubmissions: resubmit", tracked(apiclient.Unknown, 2, true), soon, apiclient.Resubmit},
		{"never accepted, body, 3 resubmissions: wait", tracked(apiclient.Unknown, 3, true), soon, apiclient.Wait},
		{"never accepted, no body: wait", tracked(apiclient.Unknown, 0, false), soon, apiclient.Wait},
		{"never accepted, 5 minutes after creation: not received", tracked(apiclient.Unknown, 0, true), late, apiclient.NotReceived},
		{"never accepted, budget used, past the window: not received", tracked(apiclient.Unknown, 3, true), late.Add(time.Hour), apiclient.NotReceived},
		{"never accepted, just inside the window: resubmit", tracked(apiclient.Unknown, 1, true), late.Add(-time.Nanosecond), apiclient.Resubmit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, apiclient.OnNotFound(tc.t, tc.now))
		})
	}
}

// TestDecideCoversEveryAnswer checks the polling rule for every kind of answer (money
// rule 7 and 8): transient failures and unsettled states keep polling the same ID and never
// create a new paid job; 410 is deleted; only the API's not_received 404 goes through the 404
// table — any other 404 (a proxy's, no_route, a body that is not the API's) is transient.
func TestDecideCoversEveryAnswer(t *testing.T) {
	now := created.Add(time.Minute)
	unknown := tracked(apiclient.Unknown, 0, true)
	accepted := tracked(apiclient.Accepted, 0, true)
	for _, tc := range []struct {
		name string
		t    apiclient.Tracked
		obs  apiclient.Observation
		want apiclient.Action
	}{
		{"network error", accepted, apiclient.Observation{Err: errors.New("connection reset")}, apiclient.KeepPolling},
		{"network error while unknown", unknown, apiclient.Observation{Err: errors.New("timeout")}, apiclient.KeepPolling},
		{"408", accepted, apiclient.Observation{StatusCode: 408}, apiclient.KeepPolling},
		{"429", accepted, apiclient.Observation{StatusCode: 429}, apiclient.KeepPolling},
		{"500", accepted, apiclient.Observation{StatusCode: 500}, apiclient.KeepPolling},
		{"502", unknown, apiclient.Observation{StatusCode: 502}, apiclient.KeepPolling},
		{"503", accepted, apiclient.Observation{StatusCode: 503}, apiclient.KeepPolling},
		{"504", accepted, apiclient.Observation{StatusCode: 504}, apiclient.KeepPolling},
		{"200 submitting", unknown, apiclient.Observation{StatusCode: 200, State: "submitting"}, apiclient.KeepPolling},
		{"200 unknown state", accepted, apiclient.Observation{StatusCode: 200, State: "quantum"}, apiclient.KeepPolling},
		{"200 empty state", accepted, apiclient.Observation{StatusCode: 200}, apiclient.KeepPolling},
		{"200 running", accepted, apiclient.Observation{StatusCode: 200, State: "running"}, apiclient.KeepPolling},
		{"200 delivered", accepted, apiclient.Observation{StatusCode: 200, State: "delivered"}, apiclient.Done},
		{"200 recovered", accepted, apiclient.Observation{StatusCode: 200, State: "recovered"}, apiclient.Done},
		{"200 refunded", accepted, apiclient.Observation{StatusCode: 200, State: "refunded"}, apiclient.Done},
		{"200 rejected", accepted, apiclient.Observation{StatusCode: 200, State: "rejected"}, apiclient.Done},
		{"200 deleted", accepted, apiclient.Observation{StatusCode: 200, State: "deleted"}, apiclient.Deleted},
		{"410", accepted, apiclient.Observation{StatusCode: 410, Code: "deleted"}, apiclient.Deleted},
		{"410 while unknown", unknown, apiclient.Observation{StatusCode: 410, Code: "deleted"}, apiclient.Deleted},
		{"410 not the API's: never resubmitted either", unknown, apiclient.Observation{StatusCode: 410}, apiclient.Deleted},
		{"404 not_received accepted", accepted, apiclient.Observation{StatusCode: 404, Code: "not_received"}, apiclient.Deleted},
		{"404 not_received unknown", unknown, apiclient.Observation{StatusCode: 404, Code: "not_received"}, apiclient.Resubmit},
		{"404 not the API's (a proxy, no body) unknown", unknown, apiclient.Observation{StatusCode: 404}, apiclient.KeepPolling},
		{"404 not the API's accepted", accepted, apiclient.Observation{StatusCode: 404}, apiclient.KeepPolling},
		{"404 no_route unknown", unknown, apiclient.Observation{StatusCode: 404, Code: "no_route"}, apiclient.KeepPolling},
		{"404 no_route accepted", accepted, apiclient.Observation{StatusCode: 404, Code: "no_route"}, apiclient.KeepPolling},
		{"404 unknown_account", unknown, apiclient.Observation{StatusCode: 404, Code: "unknown_account"}, apiclient.KeepPolling},
		{"400", accepted, apiclient.Observation{StatusCode: 400}, apiclient.Fail},
		{"401", accepted, apiclient.Observation{StatusCode: 401}, apiclient.Fail},
		{"403", accepted, apiclient.Observation{StatusCode: 403}, apiclient.Fail},
		{"409", accepted, apiclient.Observation{StatusCode: 409}, apiclient.Fail},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, apiclient.Decide(tc.t, tc.obs, now))
		})
	}
}
