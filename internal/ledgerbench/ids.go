package ledgerbench

// How a run names its accounts and jobs, and the lifecycles it sets up: every ID starts with the
// run's fresh prefix, so runs accumulate side by side and each side finds its own rows.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/jobbill/jobbill/ledgerdb"
)

// newPrefix is a fresh run prefix: the time for a human reading the tables, random hex so that
// two runs in the same second still differ.
func newPrefix() string {
	var b [3]byte
	_, _ = rand.Read(b[:])
	return "lb" + time.Now().UTC().Format("060102150405") + hex.EncodeToString(b[:])
}

// lifecycle is one of the measured lifecycles as a run sets it up.
type lifecycle struct {
	name Lifecycle
	// tag marks the lifecycle in account and job IDs.
	tag string
	// steps lists the transitions, for the report.
	steps string
	// price is the kind's price; after setUp, as the price list holds it (its version included).
	price ledgerdb.Price
	// base is the price as the run asks for it, before setUp: another ledger's setUp starts from it.
	base ledgerdb.Price
	// last is the raw script's last transition, appended to the shared opening.
	last string
	// script is the path of the lifecycle's whole pgbench script, written by setUp.
	script string
	// rows is how many ledger rows one lifecycle writes: the duplicate refund writes none.
	rows int
	// hooked puts the lifecycle's accounts, on both sides, each with a webhook endpoint, and runs a
	// delivery worker through its rounds (hooks.go); otherwise its accounts have none.
	hooked bool
	// blocks funds the lifecycle's accounts, on both sides, with several credit blocks
	// (severalGrants), so that charges draw across them; otherwise with one (oneGrant).
	blocks bool
	// grants are what each of the lifecycle's accounts is granted at the set-up, set by Run.
	grants []grant
	// result collects the lifecycle's figures.
	result *Comparison
}

// events is how many webhook events one lifecycle of an account with endpoints makes: job.charged,
// job.refunded, job.reclaimed (the duplicate refund writes no row, hence no event).
const events = 3

// label names the lifecycle in the report: its name, and whether its accounts have endpoints or
// several credit blocks.
func (lc *lifecycle) label() string {
	switch {
	case lc.hooked:
		return string(lc.name) + "+hooks"
	case lc.blocks:
		return string(lc.name) + "+blocks"
	}
	return string(lc.name)
}

// setUp puts the lifecycle's kind on the price list (or finds it there) and writes its pgbench
// script into dir.
func (lc *lifecycle) setUp(ctx context.Context, store *ledgerdb.Store, dir string) error {
	price, _, err := store.SetPrice(ctx, lc.price)
	if err != nil {
		return fmt.Errorf("ledgerbench: %w", err)
	}
	lc.price = price
	lc.script = filepath.Join(dir, lc.tag+".sql")
	if err := os.WriteFile(lc.script, []byte(rawScript(lc.last)), 0o600); err != nil {
		return fmt.Errorf("ledgerbench: %w", err)
	}
	return nil
}

// rawScript is a lifecycle's pgbench script: the shared opening, then its last transition, with
// the draw (draw.sql, its leading comment left out) written where a statement says {{draw.sql}}.
func rawScript(last string) string {
	lines := strings.SplitAfter(drawFragment, "\n")
	for len(lines) > 0 && strings.HasPrefix(lines[0], "--") {
		lines = lines[1:]
	}
	return strings.ReplaceAll(openingScript+"\n"+last, "{{draw.sql}}", strings.TrimSpace(strings.Join(lines, "")))
}

// describe says the lifecycle's price, what it bills and the credit blocks its accounts hold, for
// the report.
func (lc *lifecycle) describe() string {
	p := lc.price
	s := fmt.Sprintf("kind %s v%d, %d credits per %s, hold %d units = %d credits, n mod %d units used; %d ledger rows",
		p.Kind, p.Version, p.UnitPrice, p.Unit, p.MaxUnits, p.Hold(), p.MaxUnits, lc.rows)
	if p.Unit == ledgerdb.UnitJob {
		s = fmt.Sprintf("kind %s v%d, %d credits per job; %d ledger rows", p.Kind, p.Version, p.UnitPrice, lc.rows)
	}
	blocks := make([]string, len(lc.grants))
	for i, g := range lc.grants {
		blocks[i] = fmt.Sprintf("%s %d", g.category, g.amount)
		if g.expiresIn > 0 {
			blocks[i] += fmt.Sprintf(" expiring in %.0f days", g.expiresIn.Hours()/24)
		}
	}
	return s + "; accounts granted " + strings.Join(blocks, ", ")
}

// unitsUsed is the usage the metered lifecycle reports for a client's nth job, as settle.sql
// computes it: below the hold, so that every job has a release row, and different from one job
// to the next, so that a release taken from the wrong job's usage shows in the verification.
func (lc *lifecycle) unitsUsed(n int) int64 { return int64(n) % lc.price.MaxUnits }

type bench struct {
	cfg     Config
	pool    *pgxpool.Pool
	store   *ledgerdb.Store
	tracer  *roundTrips
	pgbench string
	// dir holds the run's scripts and pgbench's transaction logs.
	dir        string
	out        io.Writer
	prefix     string
	lifecycles []*lifecycle
	// sides are the sides this bench runs: raw and Go, or Go alone on the pre-outbox ledger
	// (preoutbox.go).
	sides []string
	// hooks is the receiver and delivery worker of the lifecycles with endpoints; nil when none.
	hooks *hooks
}

// The two sides, as they appear in IDs.
const (
	sideRaw = "r"
	sideGo  = "g"
)

// accountsPrefix starts the IDs of every account of a side and lifecycle.
func (b *bench) accountsPrefix(side string, lc *lifecycle) string {
	return fmt.Sprintf("%s-%s%sa-", b.prefix, side, lc.tag)
}

// accountID is account i (0-based) of a side and lifecycle.
func (b *bench) accountID(side string, lc *lifecycle, i int) string {
	return b.accountsPrefix(side, lc) + strconv.Itoa(i)
}

// jobsPrefix starts the IDs of every job of a side and lifecycle, in every round.
func (b *bench) jobsPrefix(side string, lc *lifecycle) string {
	return fmt.Sprintf("%s-%s%s", b.prefix, side, lc.tag)
}

// runPrefix starts the IDs of one side's jobs of a lifecycle in one round; pgbench gets it as
// -D run=....
func (b *bench) runPrefix(side string, lc *lifecycle, round int) string {
	return fmt.Sprintf("%s%d", b.jobsPrefix(side, lc), round)
}

// jobID is the ID of a client's nth job (1-based, as the script's counter) in a round.
// lifecycle.sql builds the same ID as run || '-' || client_id || '-' || n, and the verification
// reads n back from its last part.
func (b *bench) jobID(side string, lc *lifecycle, round, client, n int) string {
	return fmt.Sprintf("%s-%d-%d", b.runPrefix(side, lc, round), client, n)
}

// accountStride spreads a client's jobs over the accounts: see accountIndex.
const accountStride = 7919

// accountIndex is the account (0-based) of a client's nth job, on each side, lifecycle and
// round alike, so that both sides meet the same contention on account rows: (client + n ×
// accountStride) mod accounts. lifecycle.sql computes the same number from pgbench's client_id
// and its counter n (given the stride and the count with -D), so the raw side finds each job
// under the key the Go side put it at. The spread is not n mod accounts, which would march every
// client over the same accounts in step: each client starts at its own account (clients in step
// never share one, with no more clients than accounts), and the prime stride makes a client's
// next job jump far across the accounts rather than onto the one its neighbour just left, so that
// clients meet on an account only where they drift out of step, as with a random spread. (Were
// accounts a multiple of the stride, each client would stay on one account.)
func (b *bench) accountIndex(client, n int) int {
	return (client + n*accountStride) % b.cfg.Accounts
}

// jobKey is the key of a client's nth job in a round: its account, accountIndex, and jobID.
func (b *bench) jobKey(side string, lc *lifecycle, round, client, n int) ledgerdb.JobKey {
	return ledgerdb.JobKey{AccountID: b.accountID(side, lc, b.accountIndex(client, n)), JobID: b.jobID(side, lc, round, client, n)}
}
