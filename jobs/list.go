package jobs

import (
	"context"

	"github.com/jobbill/jobbill/ledgerdb"
)

// JobList is a page of an account's jobs as their users see them.
type JobList struct {
	// Jobs are the page's jobs, newest first, each as [Service.Status] tells it.
	Jobs []Status
	// Next is where the next page starts; nil on the last page.
	Next *ledgerdb.JobCursor
}

// List reads a page of one account's jobs as f selects them, newest first ([ledgerdb.Store.ListJobs]).
// It tells each job as the ledger has it and heals none: a page may hold two hundred jobs, and
// asking Temporal about each running one would make a list as slow as two hundred reads. A running
// job whose workflow has closed is healed by the next [Service.Status] of it, or the reconcile
// pass.
func (s *Service) List(ctx context.Context, f ledgerdb.JobFilter) (JobList, error) {
	page, err := s.opts.Ledger.ListJobs(ctx, f)
	if err != nil {
		return JobList{}, err
	}
	// One read for the page: the expiries the refunds and releases of its jobs caused.
	var returned []ledgerdb.JobKey
	for _, job := range page.Jobs {
		if returnedCredits(job) {
			returned = append(returned, job.Key())
		}
	}
	expired, err := s.opts.Ledger.ExpiredReturns(ctx, returned)
	if err != nil {
		return JobList{}, err
	}
	list := JobList{Jobs: make([]Status, 0, len(page.Jobs)), Next: page.Next}
	for _, job := range page.Jobs {
		list.Jobs = append(list.Jobs, s.statusOf(job, expired[job.Key()]))
	}
	return list, nil
}
