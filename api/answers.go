package api

import "github.com/jobbill/jobbill/jobs"

// seesInternals reports whether the caller may read what points into the operator's own systems:
// the Temporal UI's links to a job's workflow, and the causes of an outage. Admins only.
func seesInternals(p *principal) bool { return p != nil && p.admin }

// forCaller is an answer as its caller may read it: a customer's answers carry no internal URL
// or host, which would tell them of the operator's network and help them nothing.
func forCaller(p *principal, body any) any {
	if seesInternals(p) {
		return body
	}
	switch b := body.(type) {
	case jobs.Status:
		b.WorkflowURL = ""
		return b
	case jobs.Submission:
		b.Status.WorkflowURL = ""
		return b
	case JobList:
		for i := range b.Jobs {
			b.Jobs[i].WorkflowURL = ""
		}
		return b
	case jobs.ResultReport:
		b.Status.WorkflowURL = ""
		if b.Path == jobs.PathRecorded {
			// Its message names why Temporal could not be reached: an address, perhaps.
			b.Message = jobs.RecordedMessage
		}
		return b
	}
	return body
}
