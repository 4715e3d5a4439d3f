package console_test

import (
	"html"
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/apikeys"
)

// TestPagesCountInWordsThatAgree checks the console's words where a number is one, as a customer
// reads them: a job sold at 1 credit that was charged and delivered says "1 credit per job", holds
// "1 credit", its row "-1 credit", its sentence "1 credit was charged", and its account's balance
// "1 credit" — never "1 credits".
func TestPagesCountInWordsThatAgree(t *testing.T) {
	s := serve(t)
	acct, job := oneCreditDelivered(t, s.Store, "one")
	c, _ := s.signedIn(t, apikeys.ScopeCustomer, acct)

	p := get(t, c, s.URL+"/console/accounts/"+acct+"/jobs/"+job.JobID)
	require.Equal(t, http.StatusOK, p.code, p.body)
	body := html.UnescapeString(p.body)
	for _, want := range []string{": 1 credit per job", "<dt>Held</dt><dd>1 credit</dd>", "<dt>Charged as it stands</dt><dd>1 credit</dd>",
		`<span class="amount">-1 credit</span> <span class="text">Charged 1 credit for the job.</span>`, "Done. 1 credit was charged."} {
		require.Contains(t, body, want)
	}
	require.NotContains(t, body, "1 credits")

	p = get(t, c, s.URL+"/console/accounts/"+acct)
	require.Equal(t, http.StatusOK, p.code, p.body)
	require.Contains(t, p.body, "Balance now: <strong>1 credit</strong>")
	require.NotContains(t, html.UnescapeString(p.body), " 1 credits")
}
