package workerbench

// What a job costs the machinery under it, per side of the throughput comparison: the history
// events Temporal stores for it, and the CPU the Temporal server's process and the Postgres
// backends of the ledger and of Temporal's databases spend on it. The CPU is read from
// /proc/<pid>/stat (user + system time) before and after each round, so it works for any server
// on this machine: the dev server (its store is SQLite inside the process) or cluster mode's
// (its store is Postgres).

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/jobbill/jobbill/workflows"
)

// ProcessConfig says where the processes behind a run are. Zero fields take the defaults noted.
type ProcessConfig struct {
	// ServerPID is the Temporal server's process; 0 finds the process listening on the port of
	// Config.TemporalAddress on this machine (none found: the server's CPU is not reported).
	ServerPID int
	// TemporalDatabases are the Postgres databases of the Temporal server, whose backends' CPU
	// counts as Postgres' share beside the ledger's database; none for the dev server.
	TemporalDatabases []string
	// HistorySample is how many jobs of each side's last round have their history read for the
	// events per job (default 20; negative for none).
	HistorySample int
}

// ticksPerSecond is the kernel's USER_HZ, the unit of /proc/<pid>/stat's times: 100 on every
// Linux architecture Go runs on.
const ticksPerSecond = 100

// SideCost is what one side's counted jobs cost, per job.
type SideCost struct {
	// Jobs is how many jobs the CPU figures are divided by.
	Jobs int
	// ServerCPU, PostgresCPU and BenchCPU are CPU time per job: the Temporal server's process,
	// the Postgres backends of the ledger's and Temporal's databases, and this process (the
	// worker, the submitters and the client).
	ServerCPU, PostgresCPU, BenchCPU time.Duration
	// LedgerCPU is the part of PostgresCPU spent by the ledger's database's backends.
	LedgerCPU time.Duration
	// Elapsed is the wall time of the side's rounds, for the CPU's share of it.
	Elapsed time.Duration
	// HistoryJobs is how many histories were read; Events their mean length; EventTypes the
	// mean count of each event type in them.
	HistoryJobs int
	Events      float64
	EventTypes  map[string]float64
}

// MachineCPU is the CPU per job of every process behind the side: the Temporal server, Postgres
// and this process (the worker with the benchmark) — what the job costs the machine.
func (s *SideCost) MachineCPU() time.Duration {
	return s.ServerCPU + s.PostgresCPU + s.BenchCPU
}

// JobCost is a run's cost per job, by side ("bare", "metered", and "recovered" for the latency
// jobs' histories).
type JobCost struct {
	// ServerPID is the process whose CPU ServerCPU counts; 0 when none was found.
	ServerPID int
	// Databases are the databases whose backends PostgresCPU counts.
	Databases []string
	// LostBackends counts Postgres backends that exited between two readings: their CPU since
	// the first reading is missing from the figures.
	LostBackends int
	// Sides holds each side's figures by its name.
	Sides map[string]*SideCost
}

// CPURatio is the bare workflow's machine CPU per job over the metered job's: 1 when a metered
// job costs the machine what a bare one costs, below 1 by what billing adds (goal ≥ 0.95, like
// the throughput's ratio); 0 when a side was not measured.
func (c JobCost) CPURatio() float64 {
	bare, metered := c.Sides[bareSide], c.Sides[meteredSide]
	if bare == nil || metered == nil || metered.MachineCPU() == 0 {
		return 0
	}
	return float64(bare.MachineCPU()) / float64(metered.MachineCPU())
}

// LedgerCeiling is the CPU ratio a metered job would reach if billing added to the bare workflow
// nothing but the ledger's own Postgres CPU: the bare job's machine CPU over itself plus the
// ledger's database's share of a metered job. No change to the workflow, its events or its
// worker takes the CPU ratio past it; 0 when a side was not measured.
func (c JobCost) LedgerCeiling() float64 {
	bare, metered := c.Sides[bareSide], c.Sides[meteredSide]
	if bare == nil || metered == nil || bare.MachineCPU()+metered.LedgerCPU == 0 {
		return 0
	}
	return float64(bare.MachineCPU()) / float64(bare.MachineCPU()+metered.LedgerCPU)
}

// cpuMeter reads the CPU the processes behind the run have used.
type cpuMeter struct {
	b         *bench
	serverPID int
	databases []string
	cost      JobCost
}

// cpuReading is one reading of every process's CPU, in clock ticks.
type cpuReading struct {
	at       time.Time
	server   int64
	self     int64
	backends map[int]int64
	// ledger holds the backends of the ledger's database.
	ledger map[int]bool
}

func (b *bench) newCPUMeter() *cpuMeter {
	m := &cpuMeter{b: b, serverPID: b.cfg.Processes.ServerPID}
	if m.serverPID == 0 {
		if _, port, ok := strings.Cut(b.cfg.TemporalAddress, ":"); ok {
			m.serverPID, _ = listeningPID(port)
		}
	}
	var ledgerDB string
	_ = b.ledger.Pool().QueryRow(context.Background(), "SELECT current_database()").Scan(&ledgerDB)
	m.databases = append([]string{ledgerDB}, b.cfg.Processes.TemporalDatabases...)
	m.cost = JobCost{ServerPID: m.serverPID, Databases: m.databases, Sides: map[string]*SideCost{}}
	return m
}

func (m *cpuMeter) read(ctx context.Context) (cpuReading, error) {
	r := cpuReading{at: time.Now(), backends: map[int]int64{}, ledger: map[int]bool{}}
	if m.serverPID != 0 {
		r.server, _ = processTicks(m.serverPID)
	}
	r.self, _ = processTicks(os.Getpid())
	rows, err := m.b.ledger.Pool().Query(ctx, "SELECT pid, datname FROM pg_stat_activity WHERE datname = ANY($1)", m.databases)
	if err != nil {
		return r, fmt.Errorf("listing the Postgres backends: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		var db string
		if err := rows.Scan(&pid, &db); err != nil {
			return r, err
		}
		r.ledger[pid] = db == m.databases[0]
		// Postgres runs as another user: its /proc/<pid>/stat is readable, its fds are not.
		if t, err := processTicks(pid); err == nil {
			r.backends[pid] = t
		}
	}
	return r, rows.Err()
}

// add charges what happened between two readings to side, for n jobs.
func (m *cpuMeter) add(side string, before, after cpuReading, n int) {
	s := m.cost.Sides[side]
	if s == nil {
		s = &SideCost{}
		m.cost.Sides[side] = s
	}
	var pg, ledger int64
	for pid, t := range after.backends {
		// A backend that was not there before started during the round: all its time is the round's.
		pg += t - before.backends[pid]
		if after.ledger[pid] {
			ledger += t - before.backends[pid]
		}
	}
	for pid := range before.backends {
		if _, ok := after.backends[pid]; !ok {
			m.cost.LostBackends++
		}
	}
	// Accumulated as totals; per job once the run is over.
	s.ServerCPU += ticks(after.server - before.server)
	s.PostgresCPU += ticks(pg)
	s.LedgerCPU += ticks(ledger)
	s.BenchCPU += ticks(after.self - before.self)
	s.Elapsed += after.at.Sub(before.at)
	s.Jobs += n
}

// perJob turns the totals into per-job figures.
func (m *cpuMeter) perJob() JobCost {
	for _, s := range m.cost.Sides {
		if s.Jobs > 0 {
			n := time.Duration(s.Jobs)
			s.ServerCPU, s.PostgresCPU, s.BenchCPU, s.LedgerCPU = s.ServerCPU/n, s.PostgresCPU/n, s.BenchCPU/n, s.LedgerCPU/n
		}
	}
	return m.cost
}

// When a round counts as over for the CPU meter: the Temporal server spends at most quietShare of
// a core over one quietEvery (idle, the dev server spends about 1%), or quietAtMost has passed.
const (
	quietShare  = 0.05
	quietEvery  = 500 * time.Millisecond
	quietAtMost = 15 * time.Second
)

// awaitQuiet waits until the Temporal server's process has gone quiet after a round: its jobs
// have settled, but the server still writes their visibility records and drains its queues, and
// that work is theirs. It answers how long it waited; with no server process known it does not
// wait.
func (m *cpuMeter) awaitQuiet(ctx context.Context) (time.Duration, error) {
	start := time.Now()
	if m.serverPID == 0 {
		return 0, nil
	}
	last, err := processTicks(m.serverPID)
	if err != nil {
		return 0, nil
	}
	busyAtMost := time.Duration(quietShare * float64(quietEvery))
	for time.Since(start) < quietAtMost {
		select {
		case <-ctx.Done():
			return time.Since(start), context.Cause(ctx)
		case <-time.After(quietEvery):
		}
		now, err := processTicks(m.serverPID)
		if err != nil {
			break
		}
		if ticks(now-last) <= busyAtMost {
			break
		}
		last = now
	}
	return time.Since(start), nil
}

func ticks(t int64) time.Duration { return time.Duration(t) * time.Second / ticksPerSecond }

// processTicks is a process's user + system CPU time in clock ticks, from /proc/<pid>/stat.
func processTicks(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may hold spaces: count fields after it.
	i := strings.LastIndexByte(string(raw), ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	f := strings.Fields(string(raw[i+1:]))
	// After the name: state is field 3, so utime (14) and stime (15) are f[11] and f[12].
	if len(f) < 13 {
		return 0, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(f))
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("/proc/%d/stat: utime %q stime %q", pid, f[11], f[12])
	}
	return u + s, nil
}

// listeningPID finds the process listening on a TCP port of this machine: the socket's inode from
// /proc/net/tcp (and tcp6), then the process holding it among /proc/*/fd.
func listeningPID(port string) (int, error) {
	p, err := strconv.Atoi(port)
	if err != nil {
		return 0, err
	}
	want := fmt.Sprintf(":%04X", p)
	inodes := map[string]bool{}
	for _, table := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		f, err := os.Open(table)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(f)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			// local_address, ..., st (0A = LISTEN), ..., inode (field 10).
			if len(fields) > 9 && strings.HasSuffix(fields[1], want) && fields[3] == "0A" {
				inodes["socket:["+fields[9]+"]"] = true
			}
		}
		f.Close()
	}
	if len(inodes) == 0 {
		return 0, fmt.Errorf("nothing listens on port %s", port)
	}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if link, err := os.Readlink(fd); err == nil && inodes[link] {
			return strconv.Atoi(strings.Split(fd, "/")[2])
		}
	}
	return 0, fmt.Errorf("no process of ours holds the socket listening on port %s", port)
}

// countEvents reads the histories of workflowIDs and adds their mean length and mean count of
// each event type to side.
func (b *bench) countEvents(ctx context.Context, side string, workflowIDs []string) error {
	if len(workflowIDs) == 0 {
		return nil
	}
	s := b.meter.cost.Sides[side]
	if s == nil {
		s = &SideCost{}
		b.meter.cost.Sides[side] = s
	}
	types := map[string]int{}
	total := 0
	for _, id := range workflowIDs {
		iter := b.tc.GetWorkflowHistory(ctx, id, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for iter.HasNext() {
			e, err := iter.Next()
			if err != nil {
				return fmt.Errorf("reading the history of %s: %w", id, err)
			}
			name := e.GetEventType().String()
			if e.GetEventType() == enumspb.EVENT_TYPE_MARKER_RECORDED {
				// Local activities and versions are both markers: tell them apart.
				name += "(" + e.GetMarkerRecordedEventAttributes().GetMarkerName() + ")"
			}
			types[name]++
			total++
		}
	}
	n := float64(len(workflowIDs))
	s.HistoryJobs = len(workflowIDs)
	s.Events = float64(total) / n
	s.EventTypes = map[string]float64{}
	for t, c := range types {
		s.EventTypes[t] = float64(c) / n
	}
	return nil
}

// sampleIDs is up to Processes.HistorySample workflow IDs of a side's last round.
func (b *bench) sampleIDs(side string, r, n int) []string {
	k := min(b.cfg.Processes.HistorySample, n)
	ids := make([]string, 0, k)
	for i := range k {
		id := fmt.Sprintf("wb-%s-%s-r%d-%05d", b.runID, side, r, i)
		if side == meteredSide {
			id = workflows.JobWorkflowID(b.accounts[i%len(b.accounts)], id)
		}
		ids = append(ids, id)
	}
	return ids
}

// printCost prints the cost per job of each side.
func (b *bench) printCost(c JobCost) {
	fmt.Fprintf(b.out, "cost per job (CPU from /proc/<pid>/stat before and after each round; Temporal server pid %d; Postgres backends of %s):\n",
		c.ServerPID, strings.Join(c.Databases, ", "))
	for _, side := range []string{bareSide, meteredSide, recoveredSide} {
		s := c.Sides[side]
		if s == nil {
			continue
		}
		if s.Jobs > 0 {
			share := func(d time.Duration) float64 {
				return 100 * float64(d) * float64(s.Jobs) / float64(s.Elapsed)
			}
			fmt.Fprintf(b.out, "  %-9s CPU per job: Temporal server %s (%.0f%% of a core), Postgres %s (%.0f%%; the ledger's %s), worker+bench %s (%.0f%%); machine %s\n",
				side, ms(s.ServerCPU), share(s.ServerCPU), ms(s.PostgresCPU), share(s.PostgresCPU), ms(s.LedgerCPU),
				ms(s.BenchCPU), share(s.BenchCPU), ms(s.MachineCPU()))
		}
		if s.HistoryJobs > 0 {
			types := make([]string, 0, len(s.EventTypes))
			for t := range s.EventTypes {
				types = append(types, t)
			}
			slices.Sort(types)
			parts := make([]string, 0, len(types))
			for _, t := range types {
				parts = append(parts, fmt.Sprintf("%s %.1f", t, s.EventTypes[t]))
			}
			fmt.Fprintf(b.out, "  %-9s history events per job: %.1f (mean of %d): %s\n", side, s.Events, s.HistoryJobs, strings.Join(parts, ", "))
		}
	}
	if c.LostBackends > 0 {
		fmt.Fprintf(b.out, "  (%d Postgres backends exited between readings; their CPU is missing)\n", c.LostBackends)
	}
}

// recoveredSide names the latency jobs' histories: refunded, then recovered by a late result.
const recoveredSide = "recovered"

// printGoals prints the metered job against the bare workflow, each figure beside its goal: the
// throughput's ratio, the machine CPU per job's, and the history events per job that make them.
func (b *bench) printGoals(res Result) {
	fmt.Fprintf(b.out, "\nmetered against bare on %s (Temporal server %s), goal >= %.2fx each on an idle machine:\n",
		b.cfg.TemporalAddress, b.serverVersion, ratioGoal)
	fmt.Fprintf(b.out, "  throughput           %6.2f / %6.2f jobs/s (metered / bare)  = %.2fx  %s\n",
		res.MeteredMedianJobsPerSec, res.BareMedianJobsPerSec, res.Ratio, verdict(res.Ratio))
	bare, metered := res.JobCost.Sides[bareSide], res.JobCost.Sides[meteredSide]
	if bare != nil && metered != nil && metered.Jobs > 0 {
		fmt.Fprintf(b.out, "  machine CPU per job  %6s / %6s (bare / metered)        = %.2fx  %s\n",
			ms(bare.MachineCPU()), ms(metered.MachineCPU()), res.CPURatio, verdict(res.CPURatio))
		fmt.Fprintf(b.out, "  the ledger alone: %s of Postgres CPU per metered job; were it all that billing added, %s / %s = %.2fx (the CPU ratio's ceiling)\n",
			ms(metered.LedgerCPU), ms(bare.MachineCPU()), ms(bare.MachineCPU()+metered.LedgerCPU), res.JobCost.LedgerCeiling())
	}
	if bare != nil && metered != nil && metered.HistoryJobs > 0 {
		line := fmt.Sprintf("  history events       %6.1f / %6.1f per job (metered / bare)", metered.Events, bare.Events)
		if r := res.JobCost.Sides[recoveredSide]; r != nil && r.HistoryJobs > 0 {
			line += fmt.Sprintf("; recovered %.1f", r.Events)
		}
		fmt.Fprintln(b.out, line)
	}
}

// verdict says whether a ratio meets ratioGoal.
func verdict(ratio float64) string {
	if ratio >= ratioGoal {
		return "meets the goal"
	}
	return "misses the goal"
}
