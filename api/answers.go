package api

import (
	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/jobs"
)

// seesInternals reports whether the caller may read what belongs to the operator: a job's detail
// (the words of GPU services, workflows and operators — scrubbed of credentials, but they may
// still name internal hosts), the Temporal UI's links to a job's workflow, and the causes of an
// outage. Admin keys only.
func seesInternals(p *principal) bool { return p != nil && p.scope == apikeys.ScopeAdmin }

// shownTo is an answer as its caller may read it: a customer (or the GPU service's runner key)
// reads a job's reason code and its fixed message, and no internal URL or host, which would tell
// of the operator's network and help them nothing. Server.serve passes every answer through here,
// so that no handler can forget it.
func shownTo(p *principal, body any) any {
	if seesInternals(p) {
		return body
	}
	switch b := body.(type) {
	case apitype.Status:
		return customerStatus(b)
	case apitype.Submission:
		b.Status = customerStatus(b.Status)
		return b
	case apitype.JobList:
		// A copy: the caller's list stays as it was.
		shown := make([]apitype.Status, len(b.Jobs))
		for i, st := range b.Jobs {
			shown[i] = customerStatus(st)
		}
		b.Jobs = shown
		return b
	case apitype.ResultReport:
		b.Status = customerStatus(b.Status)
		if b.Path == jobs.PathRecorded {
			// Its message names why Temporal could not be reached: an address, perhaps.
			b.Message = jobs.RecordedMessage
		}
		return b
	}
	return body
}

// customerStatus is a job's status without what only operators read.
func customerStatus(st apitype.Status) apitype.Status {
	st.Detail, st.WorkflowURL = "", ""
	return st
}
