package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// TestCommandsRefuseInvisibleText checks the command line's doors for free text — a job's input,
// a grant's memo, a price's memo, a result's output and a redrive's note — against the ledger's one
// text rule: a bidirectional override, a zero-width space or a byte order mark is refused with an
// error naming the field, and nothing is written (no job, the balance and the price list
// unchanged; the append-only rule: the ledger keeps text that reads as what it is).
func TestCommandsRefuseInvisibleText(t *testing.T) {
	e := newCLIEnv(t)
	ctx := context.Background()
	acct := ledgertest.Account(t, e.Store, 100)
	kind := ledgertest.Fixed(t, e.Store, 10)
	id := ledgertest.ID(t, "job")
	key := ledgerdb.JobKey{AccountID: acct, JobID: id}

	_, err := e.run(t, "job", "submit", id, acct, kind, "--input", "s3://in/\u202egpj.exe")
	require.ErrorContains(t, err, "input reference")
	require.ErrorContains(t, err, "U+202E")
	_, err = e.Store.Job(ctx, key)
	require.ErrorIs(t, err, ledgerdb.ErrJobNotFound, "the refused submission wrote nothing")

	_, err = e.run(t, "account", "grant", acct, "5", "--key", "k-1", "--memo", "refund\u200bfor invoice")
	require.ErrorContains(t, err, "memo")
	require.ErrorContains(t, err, "U+200B")
	ledgertest.RequireBalance(t, e.Store, acct, 100)

	newKind := cliKind(t, "text")
	_, err = e.run(t, "price", "set", newKind, "--unit", "job", "--unit-price", "5", "--memo", "\ufefflaunch")
	require.ErrorContains(t, err, "memo")
	_, err = e.Store.PriceHistory(ctx, newKind)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "the refused price was not written")

	_, err = e.run(t, "job", "redrive", ledgertest.ID(t, "never"), "--account", acct, "--note", "GPU pool \u2066fixed\u2069")
	require.ErrorContains(t, err, "note")
	require.ErrorContains(t, err, "U+2066")

	e.ok(t, "job", "submit", id, acct, kind, "--input", "sim:hang")
	_, err = e.run(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://out/\u202eexe.txt")
	require.ErrorContains(t, err, "output")
	e.ok(t, "job", "report", id, "--account", acct, "--attempt", "1", "--output", "s3://out/"+id)
	ledgertest.RequireRows(t, e.Store, key, 10, ledgerdb.KindCharge)
}
