package apiclient

import (
	"context"
	"encoding/json"
	"net/http"
	"time"
)

// ResultReport is the body of POST /v1/jobs/{id}/result: a job's result landed, with the units
// its work used. It carries no amount: the server bills the usage at the job's recorded price.
type ResultReport struct {
	// Attempt is the attempt that produced the result.
	Attempt int `json:"attempt"`
	// OutputRef points at the result.
	OutputRef string `json:"output_ref"`
	// FinishedAt is when the work finished; the time the server receives the report when nil.
	FinishedAt *time.Time `json:"finished_at,omitempty"`
	// UnitsUsed is how many units of the job's kind the work used (GPU-seconds for a metered
	// kind), from 0. Nil bills the whole hold; a usage above the hold is capped at it.
	UnitsUsed *int64 `json:"units_used,omitempty"`
}

// ResultAnswer is what the API did with a reported result.
type ResultAnswer struct {
	// Path is how the result reached the job: signal, fallback, recorded (applied once the
	// server's workflow service is reachable) or already_applied.
	Path string `json:"path"`
	// Outcome, for the fallback, says whether this report billed the job.
	Outcome string `json:"outcome,omitempty"`
	// Status is the job as it stood when the report was taken; after a signal it may predate
	// the settlement, so read [Client.Status] for the settled figures.
	Status Status `json:"status"`
	// Message says what happened, in a sentence.
	Message string `json:"message"`
}

// Status reads a job once (GET /v1/jobs/{id}). An error answer is an *APIError: the API's 404
// not_received (never arrived, nothing charged), its 410 deleted (money state kept), or another
// answer — one that is not the API's has the code http_<status> — whose money state is
// [MoneyUnknown] unless the answer told it.
func (c *Client) Status(ctx context.Context, jobID string) (Status, error) {
	if _, err := pathID("job ID", jobID); err != nil {
		return Status{}, err
	}
	obs, st, apiErr := c.look(ctx, jobID)
	switch {
	case obs.Err != nil:
		return Status{}, obs.Err
	case obs.StatusCode != http.StatusOK:
		return Status{}, apiErr
	}
	return st, nil
}

// ReportResult reports that a job's result landed (POST /v1/jobs/{id}/result), with the units
// its work used. It takes a runner key (the GPU service's) or an admin key: the usage decides what
// the job costs, so a customer key is refused (403). Reporting the same result again is harmless
// (path already_applied). A refusal is an *APIError; nothing was written.
func (c *Client) ReportResult(ctx context.Context, jobID string, r ResultReport) (ResultAnswer, error) {
	id, err := pathID("job ID", jobID)
	if err != nil {
		return ResultAnswer{}, err
	}
	body, err := json.Marshal(r)
	if err != nil {
		return ResultAnswer{}, err
	}
	var answer ResultAnswer
	err = c.call(ctx, http.MethodPost, "/v1/jobs/"+id+"/result", c.jobQuery(), body, &answer, http.StatusOK, http.StatusAccepted)
	return answer, err
}
