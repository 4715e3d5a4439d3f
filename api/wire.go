package api

import (
	"time"

	"github.com/jobbill/jobbill/apikeys"
	"github.com/jobbill/jobbill/apitype"
	"github.com/jobbill/jobbill/jobs"
	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/webhooks"
)

// The answers the API writes are the wire types of package apitype, never the domain types it
// works with: the wire is a contract with every client, and the domain types change with the
// ledger and the job service. These conversions are the one place where a domain type becomes its
// answer; TestWireAnswersAsDomainJSON holds each one to the JSON its domain type writes, byte for
// byte.

// statusOf is a job's status as the API answers it.
func statusOf(st jobs.Status) apitype.Status {
	return apitype.Status{
		JobID: st.JobID, AccountID: st.AccountID, Kind: st.Kind, PriceVersion: st.PriceVersion,
		Unit: string(st.Unit), UnitPrice: st.UnitPrice, HeldUnits: st.HeldUnits, Held: st.Held,
		UnitsUsed: st.UnitsUsed, OutputRef: st.OutputRef, Charged: st.Charged, Released: st.Released,
		State: string(st.State), MoneyState: string(st.MoneyState), Attempts: st.Attempts,
		Reason: string(st.Reason), Message: st.Message, Detail: st.Detail, CreatedAt: st.CreatedAt,
		WorkflowURL: st.WorkflowURL,
	}
}

// submissionOf is the answer of a submission.
func submissionOf(sub jobs.Submission) apitype.Submission {
	return apitype.Submission{Status: statusOf(sub.Status), Duplicate: sub.Duplicate}
}

// resultReportOf is the answer of a reported result.
func resultReportOf(r jobs.ResultReport) apitype.ResultReport {
	return apitype.ResultReport{Path: r.Path, Outcome: string(r.Outcome), Status: statusOf(r.Status), Message: r.Message}
}

// priceOf is one version of a kind's price as the API answers it.
func priceOf(p ledgerdb.Price) apitype.Price {
	return apitype.Price{Kind: p.Kind, Version: p.Version, Unit: string(p.Unit), UnitPrice: p.UnitPrice,
		MaxUnits: p.MaxUnits, Memo: p.Memo, CreatedAt: p.CreatedAt}
}

// keyOf is an API key as the API answers it, never with a secret.
func keyOf(k apikeys.Key) apitype.Key {
	return apitype.Key{ID: k.ID, Scope: string(k.Scope), AccountID: k.AccountID, Name: k.Name, CreatedAt: k.CreatedAt,
		ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, Status: string(k.Status)}
}

// createdKeyOf is a key just created, with its secret, answered this once.
func createdKeyOf(c apikeys.Created) apitype.CreatedKey {
	return apitype.CreatedKey{Key: keyOf(c.Key), Secret: c.Secret}
}

// endpointOf is a webhook endpoint as the API answers it, never with its secret.
func endpointOf(e webhooks.Endpoint) apitype.Endpoint {
	return apitype.Endpoint{ID: e.ID, AccountID: e.AccountID, URL: e.URL, Description: e.Description, Status: e.Status,
		CreatedAt: e.CreatedAt, RotatedAt: e.RotatedAt, DisabledAt: e.DisabledAt}
}

// endpointCreatedOf is an endpoint with its new signing secret, answered this once.
func endpointCreatedOf(c webhooks.Created) apitype.EndpointCreated {
	return apitype.EndpointCreated{Endpoint: endpointOf(c.Endpoint), Secret: c.Secret}
}

// attemptOf is one entry of an endpoint's delivery log as the API answers it.
func attemptOf(a webhooks.Attempt) apitype.Attempt {
	return apitype.Attempt{ID: a.ID, EventID: a.EventID, EventType: a.EventType, Attempt: a.Attempt, AttemptedAt: a.AttemptedAt,
		HTTPStatus: a.HTTPStatus, Error: a.Error, DurationMS: a.DurationMS, Outcome: a.Outcome, NextAttemptAt: a.NextAttemptAt}
}

// each converts a list with one of the conversions above. A nil list stays nil and an empty one
// empty, so that an answer's JSON keeps null or [] as the domain's list had it.
func each[T, W any](xs []T, of func(T) W) []W {
	if xs == nil {
		return nil
	}
	out := make([]W, len(xs))
	for i, x := range xs {
		out[i] = of(x)
	}
	return out
}

// The ledger's credit blocks and statements carry no JSON of their own, so their answers are held
// by TestWireSetsEveryField instead of to a domain JSON; the revenue report's is held to its JSON,
// which `jobbill revenue --json` prints.

// blockOf is a credit block as the API answers it, with whether it is spendable at now.
func blockOf(b ledgerdb.Block, now time.Time) apitype.Block {
	return apitype.Block{ID: b.ID, Category: string(b.Category), Priority: b.Priority, Amount: b.Amount, Remaining: b.Remaining,
		EffectiveAt: b.EffectiveAt, ExpiresAt: b.ExpiresAt, CostBasis: b.CostBasis, Memo: b.Memo, Status: string(b.Status),
		Opening: b.Opening, ExpiredAt: b.ExpiredAt, Spendable: b.Spendable(now), CreatedAt: b.CreatedAt}
}

// statementOf is an account's statement as the API answers it.
func statementOf(st ledgerdb.Statement) apitype.Statement {
	lines := make([]apitype.StatementLine, len(st.Lines))
	for i, l := range st.Lines {
		lines[i] = apitype.StatementLine{Kind: string(l.Kind), Category: string(l.Category), JobKind: l.JobKind, Rows: l.Rows, Amount: l.Amount}
	}
	return apitype.Statement{AccountID: st.AccountID, From: st.From, To: st.To, Status: st.Status(), Opening: st.Opening,
		Lines: lines, Closing: st.Closing}
}

// revenueOf is the revenue report as the API answers it.
func revenueOf(r ledgerdb.Revenue) apitype.Revenue {
	money := func(m ledgerdb.Money) apitype.Money { return apitype.Money{Credits: m.Credits, Amount: m.Amount} }
	return apitype.Revenue{AccountID: r.AccountID, From: r.From, To: r.To, DeferredOpening: money(r.DeferredOpening),
		Granted: money(r.Granted), Recognised: money(r.Recognised), Lapsed: money(r.Lapsed), Adjusted: money(r.Adjusted),
		DeferredClosing: money(r.DeferredClosing), PromotionalSpent: r.PromotionalSpent}
}

// topUpRuleOf is an account's automatic top-up rule on the wire, with the outcome of setting it
// ("" for a read).
func topUpRuleOf(r ledgerdb.TopUpRule, outcome ledgerdb.Outcome) apitype.TopUpRule {
	return apitype.TopUpRule{AccountID: r.AccountID, Threshold: r.Threshold, Mode: string(r.Mode), Amount: r.Amount,
		MonthlyCap: r.MonthlyCap, Outcome: string(outcome)}
}
