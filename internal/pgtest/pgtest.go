// Package pgtest runs a throwaway PostgreSQL cluster of a checkout's own for its tests, which
// ledgertest starts when no URL names a test database: initdb into a directory of the checkout
// (.dev/pgtest), listening on a free port of 127.0.0.1 only, with jobbill's two roles — the owner
// and the application role, with the passwords scripts/ensure-postgres.sh gives them — and the
// tests' databases.
//
// The test processes of one `go test ./...` run in parallel, each a process of its own: the first
// that needs the cluster makes or starts it under a file lock (.dev/pgtest.lock) while the others
// wait, and they all reuse it. It is left running for the next run; `make test-services-stop`
// stops it (scripts/test-services.sh). A cluster found stopped — the machine restarted, its
// postmaster killed — is started again on its data, on a free port.
//
// initdb and the server refuse to run as root: a root test process (a container, CI) runs them
// as the system's postgres user, as scripts/ensure-postgres.sh runs psql, and gives it the data
// directory. When that user cannot reach the checkout (one under /root), the data directory is
// made in the system's temporary directory instead and .dev/pgtest links to it.
package pgtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/jobbill/jobbill/internal/devdir"
)

// The roles, as scripts/ensure-postgres.sh makes them with its default passwords: the owner,
// which owns the databases and runs the migrations, and the application role the service (and
// every test) connects as, whose name the migrations grant to.
const (
	// Owner owns the databases and runs the migrations.
	Owner = "jobbill"
	// OwnerPassword is Owner's password.
	OwnerPassword = "jobbill"
	// App is the application role, which the migrations grant to by this name.
	App = "jobbill_app"
	// AppPassword is App's password.
	AppPassword = "jobbill_app"
)

// MaxConnections is the cluster's max_connections, the value scripts/ensure-postgres.sh raises
// the local cluster to: every test process pools up to 40 connections to the tests' database and
// 20 to a test deployment's, the worker tests' `jobbill worker` processes pool their own, and
// `go test ./...` runs several test processes at once. PostgreSQL's default of 100 is too few.
const MaxConnections = 400

// superuser is the cluster's superuser, whose password only the test processes know (a file of
// the data directory, readable by its owner alone): it makes the roles and databases, nothing
// else.
const superuser = "postgres"

// passwordFile is the superuser's password, in the data directory.
const passwordFile = "jobbill-superuser-password"

// A Cluster is a running test cluster.
type Cluster struct {
	// DataDir is its data directory.
	DataDir string
	// Port is where it listens, on 127.0.0.1.
	Port int
	// Made and Started say what Ensure did: made the cluster (initdb) and started it, started it
	// on its data, or neither, finding it running.
	Made, Started bool
}

// URL is a connection URL to database on the cluster as user.
func (c *Cluster) URL(user, password, database string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", user, password, c.Port, database)
}

// Ensure answers the running cluster of dir (.dev/pgtest), with the roles and databases made:
// it reuses the cluster when it runs, starts it when it is stopped, and makes it (initdb) when
// dir holds none. Processes calling it at once take turns on the lock dir+".lock", so one makes
// or starts the cluster and the others find it running.
func Ensure(ctx context.Context, dir string, databases []string) (*Cluster, error) {
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, err
	}
	unlock, err := devdir.Lock(dir + ".lock")
	if err != nil {
		return nil, err
	}
	defer unlock()

	runner, err := serverUser()
	if err != nil {
		return nil, err
	}
	data, err := dataDir(ctx, dir, runner)
	if err != nil {
		return nil, err
	}
	c := &Cluster{DataDir: data}
	// The password is the last thing initialize writes: without it, the cluster was never made, or
	// its making did not finish (its process killed), and it is made again.
	if !exists(filepath.Join(data, passwordFile)) {
		if pid := postmaster(data); pid != 0 {
			return nil, fmt.Errorf("the test cluster %s runs (postmaster pid %d) but has no superuser password file: stop and remove it (make test-services-clean)", data, pid)
		}
		if err := initialize(ctx, data, runner); err != nil {
			return nil, err
		}
		c.Made = true
	}
	raw, err := os.ReadFile(filepath.Join(data, passwordFile))
	if err != nil {
		return nil, err
	}
	password := strings.TrimSpace(string(raw))
	if c.Port, err = runningPort(ctx, data, password); err != nil {
		return nil, err
	}
	if c.Port == 0 {
		if c.Port, err = start(ctx, data, runner); err != nil {
			return nil, err
		}
		c.Started = true
	}
	if err := prepare(ctx, c.URL(superuser, password, "postgres"), databases); err != nil {
		return nil, fmt.Errorf("the test cluster %s on port %d: %w", data, c.Port, err)
	}
	return c, nil
}

// Stop stops the cluster of dir when it runs (a fast shutdown: open sessions are ended) and
// waits until it has. Its data stays, for the next [Ensure].
func Stop(ctx context.Context, dir string) error {
	data, err := filepath.EvalSymlinks(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !exists(filepath.Join(data, "postmaster.pid")) {
		return nil
	}
	runner, err := serverUser()
	if err != nil {
		return err
	}
	bin, err := binDir(data)
	if err != nil {
		return err
	}
	return runner.run(ctx, nil, filepath.Join(bin, "pg_ctl"), "stop", "-D", data, "-m", "fast", "-w", "-s")
}

// runner runs the cluster's programs as the user that owns it.
type runner struct {
	name     string
	uid, gid int
	cred     *syscall.Credential // nil: the test process's own user
}

// serverUser is who runs initdb and the server: the test process's own user, or the system's
// postgres user for root, whom both refuse.
func serverUser() (*runner, error) {
	if os.Geteuid() != 0 {
		name := strconv.Itoa(os.Getuid())
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
		return &runner{name: name, uid: os.Getuid(), gid: os.Getgid()}, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("as root, the test cluster runs as the user postgres (initdb and postgres refuse root), and there is none: install PostgreSQL (apt-get install postgresql), run the tests as another user, or set JOBBILL_TEST_DATABASE_URL and JOBBILL_TEST_MIGRATE_DATABASE_URL: %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return &runner{name: u.Username, uid: uid, gid: gid,
		cred: &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}}, nil
}

// run runs a program as the runner, in a session of its own (so that the server pg_ctl starts
// never gets the terminal's Ctrl-C meant for the tests), with stdin as its input; the error
// carries what it printed.
func (r *runner) run(ctx context.Context, stdin []byte, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = "/" // the runner may not be allowed into the test's working directory
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Credential: r.cred}
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl's server writes to its log file, never to these pipes; should one hold them anyway,
	// do not wait for it.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", filepath.Base(name), strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// give makes path the runner's.
func (r *runner) give(path string) error {
	if r.cred == nil {
		return nil
	}
	return os.Chown(path, r.uid, r.gid)
}

// reaches reports whether the runner may enter dir (every directory above it searchable).
func (r *runner) reaches(ctx context.Context, dir string) bool {
	return r.cred == nil || r.run(ctx, nil, "/bin/sh", "-c", `cd "$1"`, "sh", dir) == nil
}

// dataDir answers the data directory of dir, made (empty, the runner's, mode 0700) when missing:
// dir itself, or the directory it links to when the runner could not reach dir.
func dataDir(ctx context.Context, dir string, r *runner) (string, error) {
	fi, err := os.Lstat(dir)
	switch {
	case err == nil && fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(dir)
		if err != nil {
			return "", err
		}
		if exists(target) {
			return target, owned(target, r)
		}
		// The system cleaned its temporary directory: make the cluster again.
		if err := os.Remove(dir); err != nil {
			return "", err
		}
	case err == nil:
		return dir, owned(dir, r)
	case !errors.Is(err, os.ErrNotExist):
		return "", err
	}
	if r.reaches(ctx, filepath.Dir(dir)) {
		if err := os.Mkdir(dir, 0o700); err != nil {
			return "", err
		}
		return dir, r.give(dir)
	}
	// Root's checkout out of the postgres user's reach: the data in the temporary directory,
	// under a name nobody could have taken in advance, and dir a link to it.
	tmp, err := os.MkdirTemp("", "jobbill-pgtest-")
	if err != nil {
		return "", err
	}
	if err := r.give(tmp); err != nil {
		return "", err
	}
	if !r.reaches(ctx, tmp) {
		return "", fmt.Errorf("the user %s, who runs the test cluster, can reach neither %s nor %s: set JOBBILL_TEST_SERVICES_DIR to a directory it can reach", r.name, filepath.Dir(dir), tmp)
	}
	return tmp, os.Symlink(tmp, dir)
}

// owned checks that the data directory is the runner's: a cluster the tests did not make is
// never adopted.
func owned(data string, r *runner) error {
	fi, err := os.Stat(data)
	if err != nil {
		return err
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != r.uid {
		return fmt.Errorf("%s is not a directory of %s's, who runs the test cluster: remove it (make test-services-clean) or set JOBBILL_TEST_SERVICES_DIR", data, r.name)
	}
	return nil
}

// initialize makes the cluster in data (initdb), with the settings of scripts/ensure-postgres.sh
// and a superuser whose password it keeps in data. Leftovers of an initdb that did not finish
// are removed first: data is the tests' own.
func initialize(ctx context.Context, data string, r *runner) error {
	entries, err := os.ReadDir(data)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(data, e.Name())); err != nil {
			return err
		}
	}
	bin, err := binDir("")
	if err != nil {
		return err
	}
	var secret [24]byte
	if _, err := rand.Read(secret[:]); err != nil {
		return err
	}
	password := hex.EncodeToString(secret[:])
	// initdb reads the password from a file: one of the runner's, removed once read.
	pwfile, err := os.CreateTemp("", "jobbill-pgtest-pw-")
	if err != nil {
		return err
	}
	defer os.Remove(pwfile.Name())
	_, err = pwfile.WriteString(password + "\n")
	if cerr := pwfile.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = r.give(pwfile.Name())
	}
	if err != nil {
		return err
	}
	// C.UTF-8, as Debian's cluster of scripts/ensure-postgres.sh has it.
	if err := r.run(ctx, nil, filepath.Join(bin, "initdb"), "-D", data, "-U", superuser,
		"--pwfile", pwfile.Name(), "--auth", "scram-sha-256", "-E", "UTF8", "--locale", "C.UTF-8"); err != nil {
		return fmt.Errorf("making the test cluster: %w", err)
	}
	// TCP on 127.0.0.1 only, no Unix socket (its directory may be no one's to write, and its path
	// too long under a deep checkout); the port is chosen at each start.
	settings := fmt.Sprintf("\n# jobbill's test cluster (internal/pgtest)\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = ''\nmax_connections = %d\n", MaxConnections)
	conf, err := os.OpenFile(filepath.Join(data, "postgresql.conf"), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return err
	}
	_, err = conf.WriteString(settings)
	if cerr := conf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(data, passwordFile), []byte(password+"\n"), 0o600)
}

var pgVersion = regexp.MustCompile(`\(PostgreSQL\) (\d+)`)

// binDir finds PostgreSQL's server programs (initdb, pg_ctl): for a data directory, those of its
// major version (PG_VERSION); otherwise the newest. It looks at initdb on PATH, then at Debian's
// /usr/lib/postgresql/<version>/bin, where they are off PATH.
func binDir(data string) (string, error) {
	want := 0
	if data != "" {
		raw, err := os.ReadFile(filepath.Join(data, "PG_VERSION"))
		if err != nil {
			return "", err
		}
		if want, err = strconv.Atoi(strings.TrimSpace(string(raw))); err != nil {
			return "", fmt.Errorf("%s/PG_VERSION: %w", data, err)
		}
	}
	var dirs []string
	if p, err := exec.LookPath("initdb"); err == nil {
		if p, err = filepath.EvalSymlinks(p); err == nil {
			dirs = append(dirs, filepath.Dir(p))
		}
	}
	debian, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	dirs = append(dirs, debian...)
	type found struct {
		dir   string
		major int
	}
	var all []found
	for _, d := range dirs {
		out, err := exec.Command(filepath.Join(d, "pg_ctl"), "--version").Output()
		if m := pgVersion.FindSubmatch(out); err == nil && m != nil {
			major, _ := strconv.Atoi(string(m[1]))
			all = append(all, found{d, major})
		}
	}
	if want != 0 {
		if i := slices.IndexFunc(all, func(f found) bool { return f.major == want }); i >= 0 {
			return all[i].dir, nil
		}
		return "", fmt.Errorf("the test cluster %s is PostgreSQL %d, whose programs are not installed (remove it to make a new one: make test-services-clean)", data, want)
	}
	if len(all) == 0 {
		return "", errors.New("PostgreSQL's server programs (initdb, pg_ctl) are neither on PATH nor in /usr/lib/postgresql/*/bin: install them (apt-get install postgresql), or set JOBBILL_TEST_DATABASE_URL and JOBBILL_TEST_MIGRATE_DATABASE_URL")
	}
	slices.SortStableFunc(all, func(a, b found) int { return b.major - a.major })
	return all[0].dir, nil
}

// runningPort answers the port of the cluster of data when it runs and answers its superuser
// (whose password is given), and 0 when it is stopped. A postmaster.pid whose
// process is gone, or is no postgres (its ID taken by another process since the machine
// restarted), is stale: the cluster is stopped, and the file is removed so that the start does
// not mistake that process for a postmaster. A postmaster that runs but never answers is an error,
// for a person to look at: the tests never kill what they did not start.
func runningPort(ctx context.Context, data, password string) (int, error) {
	pidFile := filepath.Join(data, "postmaster.pid")
	raw, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	pid, port := pidFileLines(raw)
	if pid <= 0 || !isPostgres(pid) {
		return 0, os.Remove(pidFile)
	}
	deadline := time.Now().Add(60 * time.Second) // a postmaster recovering after a crash takes a while
	for {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := pgx.Connect(cctx, (&Cluster{Port: port}).URL(superuser, password, "postgres"))
		cancel()
		if err == nil {
			_ = conn.Close(ctx)
			return port, nil
		}
		if !isPostgres(pid) {
			return 0, nil // it stopped meanwhile
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return 0, fmt.Errorf("the test cluster %s runs (postmaster pid %d) but does not answer on port %d: %w (its log: %s; stop it with make test-services-stop)",
				data, pid, port, err, filepath.Join(data, "server.log"))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pidFileLines reads a postmaster.pid: its lines are the pid, the data directory, the start time,
// the port, and more.
func pidFileLines(raw []byte) (pid, port int) {
	lines := strings.Split(string(raw), "\n")
	pid, _ = strconv.Atoi(strings.TrimSpace(lines[0]))
	if len(lines) > 3 {
		port, _ = strconv.Atoi(strings.TrimSpace(lines[3]))
	}
	return pid, port
}

// postmaster is the process ID of the postmaster running on data, or 0 when none does.
func postmaster(data string) int {
	raw, err := os.ReadFile(filepath.Join(data, "postmaster.pid"))
	if err != nil {
		return 0
	}
	if pid, _ := pidFileLines(raw); pid > 0 && isPostgres(pid) {
		return pid
	}
	return 0
}

// isPostgres reports whether process pid runs and is a postgres.
func isPostgres(pid int) bool {
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	return err == nil && strings.TrimSpace(string(comm)) == "postgres"
}

// start starts the stopped cluster on a free port, and answers the port; another program may take
// the port between the choice and the start, so a port already in use is tried again with another.
func start(ctx context.Context, data string, r *runner) (int, error) {
	bin, err := binDir(data)
	if err != nil {
		return 0, err
	}
	logFile := filepath.Join(data, "server.log")
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return 0, err
		}
		err = r.run(ctx, nil, filepath.Join(bin, "pg_ctl"), "start", "-D", data, "-l", logFile,
			"-w", "-t", "120", "-s", "-o", fmt.Sprintf("-p %d", port))
		if err == nil {
			return port, nil
		}
		text, _ := os.ReadFile(logFile)
		tail := string(text[max(0, len(text)-2000):])
		if attempt < 3 && strings.Contains(tail, "could not bind") {
			continue
		}
		return 0, fmt.Errorf("starting the test cluster %s: %w\n%s", data, err, tail)
	}
}

// freePort is a port of 127.0.0.1 that nothing listened on a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// prepare makes the roles and the databases, as scripts/ensure-postgres.sh does, where they are
// missing: the owner (which may take a checkpoint, for the ledger benchmark's test) and the
// application role, and each database owned by the owner. Identifiers and passwords are quoted by
// the server's format().
func prepare(ctx context.Context, superuserURL string, databases []string) error {
	conn, err := pgx.Connect(ctx, superuserURL)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	run := func(query string, args ...any) error {
		var stmts []string
		rows, err := conn.Query(ctx, query, args...)
		if err != nil {
			return err
		}
		if stmts, err = pgx.CollectRows(rows, pgx.RowTo[string]); err != nil {
			return err
		}
		for _, s := range stmts {
			if _, err := conn.Exec(ctx, s); err != nil {
				return fmt.Errorf("%s: %w", strings.SplitN(s, " PASSWORD", 2)[0], err)
			}
		}
		return nil
	}
	for _, role := range [][2]string{{Owner, OwnerPassword}, {App, AppPassword}} {
		if err := run(`SELECT format('CREATE ROLE %I LOGIN PASSWORD %L', $1::text, $2::text)
			WHERE NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1)`, role[0], role[1]); err != nil {
			return err
		}
	}
	if err := run(`SELECT format('GRANT pg_checkpoint TO %I', $1::text)
		WHERE NOT pg_has_role($1, 'pg_checkpoint', 'member')`, Owner); err != nil {
		return err
	}
	for _, db := range databases {
		if err := run(`SELECT format('CREATE DATABASE %I OWNER %I', $1::text, $2::text)
			WHERE NOT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)`, db, Owner); err != nil {
			return err
		}
	}
	return nil
}

func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}
