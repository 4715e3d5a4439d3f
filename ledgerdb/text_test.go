package ledgerdb_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/ledgerdb"
	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
)

// invisible are characters that make text read differently from what it is: zero-width spaces
// and joiners, direction marks, embeddings, overrides and isolates, invisible operators, the byte
// order mark, a soft hyphen, a language tag, and control characters (C0, DEL, C1).
var invisible = []rune{
	0x200B, 0x200C, 0x200D, 0x200E, 0x200F, 0x202A, 0x202B, 0x202C, 0x202D, 0x202E,
	0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x2066, 0x2067, 0x2068, 0x2069, 0xFEFF,
	0x00AD, 0x061C, 0xE0001, 0x0000, 0x0007, 0x001B, 0x007F, 0x0085, 0x009B,
	// Line and paragraph separators (a forged line in a log or a support screen), private use and
	// unassigned code points, blank fillers and variation selectors (which hide text in a string
	// that looks short).
	0x2028, 0x2029, 0xE000, 0xF8FF, 0x0378, 0x115F, 0x1160, 0x3164, 0xFFA0, 0x2800,
	0xFE00, 0xFE0F, 0xE0100, 0x180B, 0x180F, 0x17B4,
}

// TestTextRefusesInvisibleCharacters checks the ledger's one rule for free text at every door
// that keeps some from its caller (a grant's or adjustment's memo, a price's memo, a result's
// output reference): text with an invisible, bidirectional or control character is refused as
// invalid input naming the field and the character, and nothing is written — the balance, the
// price list and the result inbox are unchanged (the append-only rule: what the ledger keeps is
// what support reads, so it must read as what it is). Ordinary text in any script passes. A refund
// keeps no such text: its reason is a code, and its detail is scrubbed rather than refused
// (TestClippedTextPassesTheRule).
func TestTextRefusesInvisibleCharacters(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	acct, job := charged(t, s, 100, 40)
	kind := ledgertest.OwnKind(t)

	for _, r := range invisible {
		text := fmt.Sprintf("invoice%c42", r)
		name := fmt.Sprintf("%U", r)
		for _, door := range []struct {
			field string
			call  func() error
		}{
			{"memo", func() error {
				_, err := s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 5, Key: fmt.Sprintf("grant-%X", r), Memo: text})
				return err
			}},
			{"memo", func() error {
				_, err := s.Adjust(ctx, ledgerdb.Credit{AccountID: acct, Amount: -5, Key: fmt.Sprintf("adjust-%X", r), Memo: text})
				return err
			}},
			{"memo", func() error {
				_, _, err := s.SetPrice(ctx, ledgerdb.Price{Kind: kind, Unit: ledgerdb.UnitJob, UnitPrice: 1, MaxUnits: 1, Memo: text})
				return err
			}},
			{"output reference", func() error {
				_, err := s.RecordResult(ctx, ledgerdb.ResultReport{Key: job, Attempt: 1, OutputRef: "s3://" + text})
				return err
			}},
		} {
			err := door.call()
			require.ErrorIs(t, err, ledgerdb.ErrInvalidInput, "%s with %s", door.field, name)
			require.ErrorContains(t, err, "invalid "+door.field, "%s with %s", door.field, name)
			require.ErrorContains(t, err, name, door.field)
		}
	}

	ledgertest.RequireBalance(t, s, acct, 100-40)
	_, err := s.PriceHistory(ctx, kind)
	require.ErrorIs(t, err, ledgerdb.ErrUnknownKind, "no refused price was written")
	got, err := s.Job(ctx, job)
	require.NoError(t, err)
	require.Equal(t, ledgerdb.StateRunning, got.State, "no refused refund was written")
	var reports int
	require.NoError(t, s.Pool().QueryRow(ctx, `SELECT count(*) FROM result_reports WHERE job_id = $1`, job.String()).Scan(&reports))
	require.Zero(t, reports)

	_, err = s.Grant(ctx, ledgerdb.Credit{AccountID: acct, Amount: 5, Key: "plain", Memo: "Café Ωmega — 日本語 🎬, tab-free"})
	require.NoError(t, err, "ordinary text in any script is kept")
}

// TestClippedTextPassesTheRule checks that the words the ledger keeps rather than refuses (a
// refund's detail made of a GPU service's message) always pass the text rule once clipped
// (ClipText) or scrubbed (ScrubText, which the ledger applies to a refund's detail), and that a
// refund is never blocked by the words that explain it (the net-effect rule: a failed job nets 0):
// the refund is applied and its detail kept without the invisible character.
func TestClippedTextPassesTheRule(t *testing.T) {
	ctx := context.Background()
	s := ledgertest.Store(t)
	for _, r := range invisible {
		words := fmt.Sprintf("GPU said: out of memory%c\n(%c)", r, r)
		require.NoError(t, ledgerdb.ValidateText("detail", ledgerdb.ClipText(words), ledgerdb.MaxTextLength), "%U", r)
		require.NoError(t, ledgerdb.ValidateText("detail", ledgerdb.ScrubText(words), ledgerdb.MaxTextLength), "%U", r)

		acct, job := charged(t, s, 100, 40)
		tr, err := s.Refund(ctx, job, ledgerdb.ReasonGPUFailed, words, 1)
		require.NoError(t, err, "%U", r)
		require.Equal(t, ledgerdb.Applied, tr.Outcome)
		require.Equal(t, ledgerdb.ReasonGPUFailed, tr.Job.RefundReason)
		require.NoError(t, ledgerdb.ValidateText("detail", tr.Job.RefundDetail, ledgerdb.MaxTextLength), "%U", r)
		require.Contains(t, tr.Job.RefundDetail, "GPU said: out of memory", "%U", r)
		ledgertest.RequireBalance(t, s, acct, 100)
	}
}
