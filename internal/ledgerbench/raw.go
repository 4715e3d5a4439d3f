package ledgerbench

// The raw-SQL side: the lifecycle scripts under pgbench.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

var (
	pgbenchProcessed = regexp.MustCompile(`number of transactions actually processed: (\d+)/(\d+)`)
	pgbenchFailed    = regexp.MustCompile(`number of failed transactions: (\d+)`)
	pgbenchLatency   = regexp.MustCompile(`latency average = ([0-9.]+) ms`)
	pgbenchTPS       = regexp.MustCompile(`tps = ([0-9.]+) \(without initial connection time\)`)
)

// runRaw runs one round of a lifecycle's raw-SQL side under pgbench.
func (b *bench) runRaw(ctx context.Context, lc *lifecycle, round int) (Figures, error) {
	// -M prepared: each client parses each statement once, as pgx's statement cache does on the
	// Go side. -n: there are no pgbench tables to vacuum. n=0 seeds each client's counter; the
	// accounts' prefix, their count and the stride give each job's account (accountIndex); held
	// is what settle.sql derives the usage from.
	args := []string{"-n", "-M", "prepared",
		"-c", strconv.Itoa(b.cfg.Clients), "-j", strconv.Itoa(b.cfg.PgbenchThreads), "-t", strconv.Itoa(b.cfg.Lifecycles),
		"-D", "run=" + b.runPrefix(sideRaw, lc, round), "-D", "n=0",
		"-D", "accounts_prefix=" + b.accountsPrefix(sideRaw, lc), "-D", "accounts=" + strconv.Itoa(b.cfg.Accounts),
		"-D", "stride=" + strconv.Itoa(accountStride)}
	if lc.name == Metered {
		args = append(args, "-D", "held="+strconv.FormatInt(lc.price.MaxUnits, 10))
	}
	logPrefix := filepath.Join(b.dir, fmt.Sprintf("raw-%s-%d", lc.tag, round))
	args = append(args, "-l", "--log-prefix", logPrefix)
	args = append(args, "-f", lc.script, b.cfg.DatabaseURL)
	load := loadAverage()
	cmd := exec.CommandContext(ctx, b.pgbench, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	report := stdout.String() + stderr.String()
	// The URL may hold a password; the printed command leaves it out.
	shown := strings.Join(append([]string{"pgbench"}, args[:len(args)-1]...), " ") + " <database URL>"
	if runErr != nil {
		return Figures{}, fmt.Errorf("ledgerbench: %s: %w\n%s", shown, runErr, report)
	}

	expected := b.cfg.Clients * b.cfg.Lifecycles
	m := pgbenchProcessed.FindStringSubmatch(report)
	if m == nil || m[1] != strconv.Itoa(expected) || m[2] != strconv.Itoa(expected) {
		return Figures{}, fmt.Errorf("ledgerbench: pgbench did not process all %d %s lifecycles:\n%s", expected, lc.name, report)
	}
	if f := pgbenchFailed.FindStringSubmatch(report); f == nil || f[1] != "0" {
		return Figures{}, fmt.Errorf("ledgerbench: pgbench reported failed %s lifecycles:\n%s", lc.name, report)
	}
	lat, tps := pgbenchLatency.FindStringSubmatch(report), pgbenchTPS.FindStringSubmatch(report)
	if lat == nil || tps == nil {
		return Figures{}, fmt.Errorf("ledgerbench: cannot read pgbench's latency and tps:\n%s", report)
	}
	latency, err1 := strconv.ParseFloat(lat[1], 64)
	rate, err2 := strconv.ParseFloat(tps[1], 64)
	if err := errors.Join(err1, err2); err != nil || rate <= 0 {
		return Figures{}, fmt.Errorf("ledgerbench: reading pgbench's figures: %v\n%s", err, report)
	}
	if round == 1 {
		fmt.Fprintf(b.out, "raw side command, %s: %s\n", lc.label(), shown)
	}
	p99, err := pgbenchP99(logPrefix)
	if err != nil {
		return Figures{}, fmt.Errorf("ledgerbench: %w", err)
	}
	return Figures{
		P99Lifecycle:           p99,
		Lifecycles:             expected,
		Elapsed:                time.Duration(float64(expected) / rate * float64(time.Second)),
		LifecyclesPerSec:       rate,
		TransitionsPerSec:      rate * TransitionsPerLifecycle,
		MeanLatency:            time.Duration(latency * float64(time.Millisecond)),
		RoundTripsPerLifecycle: TransitionsPerLifecycle,
		LoadAverage:            load,
	}, nil
}
