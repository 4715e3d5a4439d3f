package console

import (
	"errors"
	"net/http"
	"strings"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
)

// operatorHome is where an operator starts: an account to open by ID, and the operator's lists.
func (c *Console) operatorHome(w http.ResponseWriter, r *http.Request, v *viewer) error {
	c.render(w, r, http.StatusOK, "operator", v, "Operator", nil)
	return nil
}

// findAccount opens the account an operator typed: its page, or a clear refusal of an ID that
// cannot be one.
func (c *Console) findAccount(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id := strings.TrimSpace(r.URL.Query().Get("account_id"))
	if id == "" {
		return badInput("Type an account ID to open it.")
	}
	if err := ledgerdb.ValidateID("account ID", id); err != nil {
		return err
	}
	if _, err := c.opts.Ledger.Balance(r.Context(), id); err != nil {
		return err
	}
	http.Redirect(w, r, accountPath(id), http.StatusSeeOther)
	return nil
}

// maxDeadLetters is the most dead letters the page lists.
const maxDeadLetters = 200

// deadLetters lists every account's dead letters, most recently refunded first, each linked to its
// job's page and its redrive form.
func (c *Console) deadLetters(w http.ResponseWriter, r *http.Request, v *viewer) error {
	jobs, err := c.opts.Ledger.DeadLetters(r.Context(), 0, maxDeadLetters)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "deadletters", v, "Dead letters", deadLettersData{Jobs: jobs})
	return nil
}

// deadLettersData is the dead letters page's.
type deadLettersData struct{ Jobs []ledgerdb.Job }

// JobPath links a dead letter to its job's page.
func (deadLettersData) JobPath(accountID, jobID string) string { return jobPath(accountID, jobID) }

// Detail is the refund's words for an operator, scrubbed again as the job's status scrubs them: a
// job refunded before the ledger scrubbed its words may hold a password.
func (deadLettersData) Detail(job ledgerdb.Job) string { return ledgerdb.ScrubText(job.RefundDetail) }

// maxAlarms is the most alarms the page lists.
const maxAlarms = 200

// alarms lists the ledger's alarms, oldest first: each a ledger step that needs a person.
func (c *Console) alarms(w http.ResponseWriter, r *http.Request, v *viewer) error {
	alarms, err := c.opts.Ledger.Alarms(r.Context(), maxAlarms)
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "alarms", v, "Alarms", alarmsData{Alarms: alarms})
	return nil
}

// alarmsData is the alarms page's.
type alarmsData struct{ Alarms []ledgerdb.Alarm }

// JobPath links an alarm to its job.
func (alarmsData) JobPath(accountID, jobID string) string { return jobPath(accountID, jobID) }

// prices lists every kind's current price.
func (c *Console) prices(w http.ResponseWriter, r *http.Request, v *viewer) error {
	prices, err := c.opts.Ledger.Prices(r.Context())
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "prices", v, "Prices", pricesData{Prices: prices})
	return nil
}

// pricesData is the prices pages'.
type pricesData struct {
	// Kind is the kind whose history the page shows; "" on the list of current prices.
	Kind   string
	Prices []ledgerdb.Price
}

// priceHistory lists every version of one kind's price, oldest first.
func (c *Console) priceHistory(w http.ResponseWriter, r *http.Request, v *viewer) error {
	kind := r.PathValue("kind")
	if ledgerdb.ValidateKind(kind) != nil {
		return errNotFound
	}
	history, err := c.opts.Ledger.PriceHistory(r.Context(), kind)
	if err != nil {
		return err
	}
	if len(history) == 0 {
		return errNotFound
	}
	c.render(w, r, http.StatusOK, "prices", v, "Price history of "+kind, pricesData{Kind: kind, Prices: history})
	return nil
}

// keyList lists every API key, never a secret, with a revoke button for each active one.
func (c *Console) keyList(w http.ResponseWriter, r *http.Request, v *viewer) error {
	keys, err := c.keys.List(r.Context(), "")
	if err != nil {
		return err
	}
	c.render(w, r, http.StatusOK, "keys", v, "API keys", keysData{Keys: keys, Self: v.key.ID})
	return nil
}

// keysData is the keys page's.
type keysData struct {
	Keys []apikeys.Key
	// Self is the signed-in key's ID: revoking it ends this session too.
	Self string
}

// revokeData is the revocation's confirmation page's.
type revokeData struct {
	Key apikeys.Key
	// Self says the key is the signed-in one: revoking it ends this session too.
	Self bool
	// Problem says why the last post revoked nothing; "" on a first visit.
	Problem string
}

// Active says whether the key can still be revoked.
func (d revokeData) Active() bool { return d.Key.Status == apikeys.StatusActive }

// revokeForm asks before a key is revoked, since revocation is final: the page says what revoking
// does and takes a ticked confirmation (the console sends no script, so no dialog could ask).
func (c *Console) revokeForm(w http.ResponseWriter, r *http.Request, v *viewer) error {
	return c.showRevoke(w, r, v, http.StatusOK, "")
}

func (c *Console) showRevoke(w http.ResponseWriter, r *http.Request, v *viewer, status int, problem string) error {
	key, err := c.keys.Get(r.Context(), r.PathValue("key"))
	if err != nil {
		return err
	}
	c.render(w, r, status, "revoke", v, "Revoke key "+key.ID, revokeData{Key: key, Self: key.ID == v.key.ID, Problem: problem})
	return nil
}

// revokeKey revokes a key once its confirmation is ticked: its secret and every console session
// opened with it authenticate nothing from now on. The keys page then says so.
func (c *Console) revokeKey(w http.ResponseWriter, r *http.Request, v *viewer) error {
	id := r.PathValue("key")
	if err := apikeys.ValidateKeyID(id); err != nil {
		return err
	}
	if r.PostFormValue("confirm") != "yes" {
		return c.showRevoke(w, r, v, http.StatusBadRequest, "Tick the box to confirm that revoking is final. Nothing was changed.")
	}
	_, outcome, err := c.keys.Revoke(r.Context(), id)
	if err != nil {
		return err
	}
	notice := noticeKeyRevoked
	if outcome == ledgerdb.AlreadyApplied {
		notice = noticeKeyAlreadyRevoked
	}
	notify(w, r, keysPath, notice, id)
	http.Redirect(w, r, keysPath, http.StatusSeeOther)
	return nil
}

// keysPath is the operator's keys page.
const keysPath = "/console/operator/keys"

// redrive runs a dead-lettered job's work again (jobs.Service.Redrive, the path of POST
// /v1/jobs/{id}/redrive and `jobbill job redrive`), named in its timeline as this key's.
func (c *Console) redrive(w http.ResponseWriter, r *http.Request, v *viewer) error {
	key, err := readableJob(r, v)
	if err != nil {
		return err
	}
	st, err := c.opts.Jobs.Redrive(r.Context(), key, "console "+v.key.ID, r.PostFormValue("note"))
	page := jobPath(key.AccountID, key.JobID)
	// The job's page says what happened: the redrive leaves the job refunded until its work
	// succeeds, so without a word the page would look as it did.
	switch {
	case errors.Is(err, jobs.ErrNotDeadLettered):
		state := string(st.State)
		if state == "" { // its status could not be read beside the refusal
			state = "not refunded"
		}
		notify(w, r, page, noticeRedriveRefused, state)
	case errors.Is(err, jobs.ErrWorkflowIDTaken):
		notify(w, r, page, noticeRedriveIDTaken, "")
	case err != nil:
		return err
	default:
		notify(w, r, page, noticeRedriveStarted, "")
	}
	http.Redirect(w, r, page, http.StatusSeeOther)
	return nil
}
