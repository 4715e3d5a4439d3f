package ledgerdb

import (
	"fmt"
	"strings"
)

// JobKey names one job. Job IDs belong to their account — two accounts may choose the same ID,
// and neither can see or claim the other's — so a job is its account and its ID together.
type JobKey struct {
	// AccountID is the account the job belongs to (and that pays for it).
	AccountID string
	// JobID is the ID the account's client chose.
	JobID string
}

// Validate checks both parts against the ID format.
func (k JobKey) Validate() error {
	if err := ValidateID("account ID", k.AccountID); err != nil {
		return err
	}
	return ValidateID("job ID", k.JobID)
}

// String is the key as the ledger stores it, "<account>/<job>": neither part may hold a "/", so
// the text names exactly one job (and follows "job/" in the job's workflow ID).
func (k JobKey) String() string { return k.AccountID + "/" + k.JobID }

// jobIDOfKey is the job's own ID in a key the ledger stored.
func jobIDOfKey(stored string) string {
	_, job, found := strings.Cut(stored, "/")
	if !found {
		return stored
	}
	return job
}

// keyOf reads a key the ledger stored.
func keyOf(stored string) (JobKey, error) {
	account, job, found := strings.Cut(stored, "/")
	if !found {
		return JobKey{}, fmt.Errorf("the ledger holds a job key without an account: %q", stored)
	}
	return JobKey{AccountID: account, JobID: job}, nil
}
