package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/ledgerdb"
)

// Signals come from anywhere: the job service, the Temporal UI's Signal button, another program's
// SDK, an operator's script. A payload that cannot be read, or that names an attempt that never
// ran, must not fail the run nor stop it: it is ignored — logged, counted in a metric, shown in
// the run's details and in the status query — and the job goes on.
//
// Payloads are received as raw values and decoded here, because the SDK, given a payload it
// cannot decode into the channel's type, drops it and blocks the receiving callback until the
// next signal arrives — a selector waiting on the work would stop hearing the work's result.

// IgnoredPayloadsMetric counts the signal payloads runs refused
// (jobbill_ignored_payloads_total{signal}).
const IgnoredPayloadsMetric = "jobbill_ignored_payloads"

// receiveResult takes one result signal from c and says whether it may be billed. A run of the
// original version took every readable result as it came.
func (j *meteredJob) receiveResult(ctx workflow.Context, c workflow.ReceiveChannel) (ResultSignal, bool) {
	var raw converter.RawValue
	c.Receive(ctx, &raw)
	return j.checkResult(ctx, raw)
}

// receiveResultAsync takes a result signal that is already waiting, if there is a billable one.
func (j *meteredJob) receiveResultAsync(ctx workflow.Context) (ResultSignal, bool) {
	for {
		var raw converter.RawValue
		if !j.results.ReceiveAsync(&raw) {
			return ResultSignal{}, false
		}
		if s, ok := j.checkResult(ctx, raw); ok {
			return s, true
		}
	}
}

func (j *meteredJob) checkResult(ctx workflow.Context, raw converter.RawValue) (ResultSignal, bool) {
	var s ResultSignal
	if err := decode(raw, &s); err != nil {
		j.ignore(ctx, SignalResult, "its payload cannot be read: "+err.Error())
		return s, false
	}
	if j.original() {
		return s, true
	}
	// The first attempt counts as run even before the ledger recorded it (recording it is best
	// effort); any later one must have been reached.
	if err := s.Validate(max(j.lastAttempt, j.status.Attempts, 1)); err != nil {
		j.ignore(ctx, SignalResult, err.Error())
		return s, false
	}
	return s, true
}

// receiveRedrive takes one redrive signal from c and says whether it may be acted on.
func (j *meteredJob) receiveRedrive(ctx workflow.Context, c workflow.ReceiveChannel) (RedriveRequest, bool) {
	var raw converter.RawValue
	c.Receive(ctx, &raw)
	var r RedriveRequest
	if err := decode(raw, &r); err != nil {
		j.ignore(ctx, SignalRedrive, "its payload cannot be read: "+err.Error())
		return r, false
	}
	if j.original() {
		return r, true
	}
	if err := r.Validate(); err != nil {
		j.ignore(ctx, SignalRedrive, err.Error())
		return r, false
	}
	return r, true
}

// decode reads a signal's payload into v with the default data converter, as the SDK would have.
func decode(raw converter.RawValue, v any) error {
	if raw.Payload() == nil {
		return errors.New("the signal carries no payload")
	}
	return converter.GetDefaultDataConverter().FromPayload(raw.Payload(), v)
}

// ignore records a refused signal: the run's log, a metric, the status query and its details.
func (j *meteredJob) ignore(ctx workflow.Context, signal, why string) {
	why = fmt.Sprintf("a %q signal was ignored: %s", signal, ledgerdb.ScrubText(why))
	j.status.IgnoredSignals++
	j.status.LastIgnored = why
	workflow.GetLogger(ctx).Warn("Signal ignored; the job goes on.", "Signal", signal, "Why", why)
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"signal": signal}).Counter(IgnoredPayloadsMetric).Inc(1)
	workflow.SetCurrentDetails(ctx, fmt.Sprintf("%s\n\nIgnored %d signal(s); the last: %s.", j.details, j.status.IgnoredSignals, why))
}
