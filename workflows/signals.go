package workflows

import (
	"errors"
	"fmt"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/workflow"

	"github.com/jobbill/jobbill/activities"
	"github.com/jobbill/jobbill/internal/jsonint"
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
//
// A result signal the run cannot bill, while the job could still take one, may be delivered work
// going unbilled: beyond being ignored, it raises an alarm (from versionWholeNumbers on).

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

// checkResult decodes and checks a result signal received while the job can still take one (it
// is running, or refunded and listening).
func (j *meteredJob) checkResult(ctx workflow.Context, raw converter.RawValue) (ResultSignal, bool) {
	var s ResultSignal
	if err := j.decode(raw, &s); err != nil {
		j.unbillable(ctx, "its payload cannot be read: "+err.Error())
		return s, false
	}
	if j.original() {
		return s, true
	}
	// The first attempt counts as run even before the ledger recorded it (recording it is best
	// effort); any later one must have been reached.
	if err := s.Validate(max(j.lastAttempt, j.status.Attempts, 1)); err != nil {
		j.unbillable(ctx, err.Error())
		return s, false
	}
	return s, true
}

// unbillable ignores a result signal the run cannot bill although the job could still take one.
// Its sender may hold delivered work that nothing will bill, and no retry can tell what it meant,
// so from versionWholeNumbers on it also raises an alarm for a person: a ledger_alarms row of the
// step [ledgerdb.AlarmUnbillableResult], a metric, ALARM in the run's details, and the audit's
// ledger_alarm until the job is settled. The ledger keeps one alarm per job and step, and the run
// raises it once, so that a stream of bad signals adds one ledger step, not one each.
func (j *meteredJob) unbillable(ctx workflow.Context, why string) {
	if j.version >= versionWholeNumbers && !j.resultAlarmRaised {
		j.resultAlarmRaised = true
		message := "a result signal could not be billed: " + ledgerdb.ScrubText(why)
		_, err := ledgerStep(ctx, "raise an alarm: a result signal could not be billed", a.RaiseAlarm,
			activities.AlarmInput{Job: j.in.Job(), Step: ledgerdb.AlarmUnbillableResult, Message: message})
		if err != nil {
			workflow.GetLogger(ctx).Error("Raising an alarm failed.", "Step", ledgerdb.AlarmUnbillableResult, "Error", err)
		}
		workflow.GetLogger(ctx).Error("A result signal could not be billed; an operator must look.", "Why", message)
		j.details += fmt.Sprintf("\n\nALARM: %s. Its sender may hold delivered work: find it, and report the result again "+
			"in a form the job takes.", message)
	}
	j.ignore(ctx, SignalResult, why)
}

// receiveRedrive takes one redrive signal from c and says whether it may be acted on.
func (j *meteredJob) receiveRedrive(ctx workflow.Context, c workflow.ReceiveChannel) (RedriveRequest, bool) {
	var raw converter.RawValue
	c.Receive(ctx, &raw)
	var r RedriveRequest
	if err := j.decode(raw, &r); err != nil {
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
// A run of versionWholeNumbers on reads the integers of a JSON payload as every language writes
// them (jsonint.Normalize); earlier runs refused 50.0 for an integer, and replay as they did.
func (j *meteredJob) decode(raw converter.RawValue, v any) error {
	payload := raw.Payload()
	if payload == nil {
		return errors.New("the signal carries no payload")
	}
	if j.version >= versionWholeNumbers &&
		string(payload.GetMetadata()[converter.MetadataEncoding]) == converter.MetadataEncodingJSON {
		payload = &commonpb.Payload{Metadata: payload.GetMetadata(), Data: jsonint.Normalize(payload.GetData())}
	}
	return converter.GetDefaultDataConverter().FromPayload(payload, v)
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
