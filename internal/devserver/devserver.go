// Package devserver runs a Temporal dev server (`temporal server start-dev`) of a caller's own: on
// free ports, with a file store that survives a stop, ready for jobbill (its namespace and search
// attributes, workflows.DevServerFlags). Callers that must stop and start Temporal on purpose — the
// chaos run, the tests of what jobbill does while Temporal is down — use it so that they never
// touch the dev server other tests and people rely on. [Ensure] keeps one running for a
// checkout's tests when no address names one (workertest), shared by its test processes.
package devserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/jobbill/jobbill/internal/devdir"
	"github.com/jobbill/jobbill/workflows"
)

// CLI finds the Temporal CLI: given when it is not empty, otherwise `temporal` on PATH, then
// $(go env GOPATH)/bin/temporal, where scripts/ensure-temporal.sh installs it.
func CLI(given string) (string, error) {
	if given != "" {
		return given, nil
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	gopath, err := exec.Command("go", "env", "GOPATH").Output()
	if err == nil {
		p := filepath.Join(strings.TrimSpace(string(gopath)), "bin", "temporal")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("the Temporal CLI is not installed: neither `temporal` on PATH nor $(go env GOPATH)/bin/temporal (bash scripts/ensure-temporal.sh installs it)")
}

// Server is a dev server of the caller's own. Its store is a file, so Stop and Start again keep
// every workflow, as a real cluster's restart would; its ports are picked once, by [New], so a
// client keeps the same address across restarts.
type Server struct {
	// Binary is the Temporal CLI that runs the server.
	Binary string
	// Port is the frontend's gRPC port; the Web UI's is Port+1000 (the server is started headless,
	// but start-dev still checks that port).
	Port int
	// DBFile is the server's store.
	DBFile string
	// LogFile receives the server's output, appended across restarts.
	LogFile string
	// Namespaces are made besides workflows.DefaultNamespace, with the same search attributes.
	Namespaces []string
	// Detached lets the server outlive the process that starts it, in a session of its own (no
	// terminal's Ctrl-C reaches it): [Ensure]'s, which later processes reuse. Otherwise the server
	// dies with its starter.
	Detached bool

	cmd  *exec.Cmd
	done chan struct{}
}

// New prepares a server that keeps its store and log in dir, on free ports, with the Temporal CLI
// bin (found with [CLI] when empty). It starts nothing.
func New(bin, dir string) (*Server, error) {
	bin, err := CLI(bin)
	if err != nil {
		return nil, err
	}
	port, err := freePortPair()
	if err != nil {
		return nil, err
	}
	return &Server{Binary: bin, Port: port, DBFile: filepath.Join(dir, "temporal.db"), LogFile: filepath.Join(dir, "temporal.log")}, nil
}

// Address is the frontend's host:port.
func (s *Server) Address() string { return "127.0.0.1:" + strconv.Itoa(s.Port) }

// PID is the running server's process ID; 0 when it is not running.
func (s *Server) PID() int {
	if s.cmd == nil || s.cmd.Process == nil || s.exited() {
		return 0
	}
	return s.cmd.Process.Pid
}

func (s *Server) exited() bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// Start launches the server on its store and waits until its frontend answers (up to 90 seconds:
// a loaded two-core machine takes several). Starting it again after [Server.Stop] reopens the same
// store on the same ports.
func (s *Server) Start(ctx context.Context) error {
	if s.PID() != 0 {
		return fmt.Errorf("the Temporal dev server on %s is already running", s.Address())
	}
	logf, err := os.OpenFile(s.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := []string{"server", "start-dev", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(s.Port), "--ui-port", strconv.Itoa(s.Port + 1000),
		"--db-filename", s.DBFile, "--log-level", "warn", "--headless"}
	args = append(args, workflows.DevServerFlags()...)
	for _, ns := range s.Namespaces {
		if ns != workflows.DefaultNamespace {
			args = append(args, "--namespace", ns)
		}
	}
	cmd := exec.Command(s.Binary, args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if s.Detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		// The server must not outlive a caller that dies without cleaning up.
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", s.Binary, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	return waitHealthy(ctx, s.Address(), func() bool { return !s.exited() })
}

// Stop ends the server gracefully (SIGTERM lets it close its file store), killing it if it takes
// longer than 20 seconds, and returns once it has exited. Stopping a stopped server does nothing.
func (s *Server) Stop() {
	if s.cmd == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(20 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// freePortPair finds a port P such that P and P+1000 (the dev server's UI port) are both free on
// 127.0.0.1. Another process may take one between the check and the server's start; the start
// then fails loudly rather than joining someone else's server.
func freePortPair() (int, error) {
	for range 50 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		p := ln.Addr().(*net.TCPAddr).Port
		_ = ln.Close()
		if p+1000 > 65535 {
			continue
		}
		ui, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p+1000))
		if err != nil {
			continue
		}
		_ = ui.Close()
		return p, nil
	}
	return 0, errors.New("no free port pair for the Temporal dev server")
}

// waitHealthy dials the frontend until it answers (the SDK's dial checks the server's health),
// giving up when the server's process is no longer alive.
func waitHealthy(ctx context.Context, address string, alive func() bool) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		tc, err := client.DialContext(dctx, client.Options{HostPort: address, Logger: quiet})
		cancel()
		if err == nil {
			tc.Close()
			return nil
		}
		if !alive() {
			return fmt.Errorf("the Temporal dev server on %s exited before it was healthy", address)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Temporal dev server on %s did not become healthy: %w", address, err)
		}
	}
}

// quiet is the SDK's logger for the dials here, whose retries are expected.
var quiet = log.NewStructuredLogger(slog.New(slog.DiscardHandler))

// pidFile is where [Ensure] records its server's process ID, in the server's directory.
const pidFile = "server.pid"

// Ensure answers the address of the dev server of dir — its store, log and process ID kept there —
// and whether it started it: it starts the server, detached, when it does not run, with
// workflows.DefaultNamespace and namespaces, each with the search attributes the workflows upsert
// (added to a running server that lacks one, as scripts/ensure-temporal.sh adds them). It is a checkout's own server for its tests (workertest
// starts it when no address is set): processes calling it at once take turns on the lock
// dir+".lock", so that one starts the server and the others reuse it, as do later runs. A recorded
// process that is gone, or is no longer this server, is stale, and a new server is started.
func Ensure(ctx context.Context, bin, dir string, namespaces []string) (address string, started bool, err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, err
	}
	unlock, err := devdir.Lock(dir + ".lock")
	if err != nil {
		return "", false, err
	}
	defer unlock()
	store := filepath.Join(dir, "temporal.db")
	if pid, port := recorded(dir, store); pid != 0 {
		address = "127.0.0.1:" + strconv.Itoa(port)
		if err := waitHealthy(ctx, address, func() bool { return runs(pid, store) != 0 }); err != nil {
			return "", false, fmt.Errorf("the dev server of %s (pid %d) does not answer on %s: %w (its log: %s; stop it with make test-services-stop)",
				dir, pid, address, err, filepath.Join(dir, "temporal.log"))
		}
	} else {
		srv, err := New(bin, dir)
		if err != nil {
			return "", false, err
		}
		srv.Namespaces, srv.Detached = namespaces, true
		if err := srv.Start(ctx); err != nil {
			return "", false, fmt.Errorf("%w (its log: %s)", err, srv.LogFile)
		}
		if err := os.WriteFile(filepath.Join(dir, pidFile), []byte(strconv.Itoa(srv.PID())+"\n"), 0o644); err != nil {
			return "", false, err
		}
		address, started = srv.Address(), true
	}
	if err := prepare(ctx, address, append([]string{workflows.DefaultNamespace}, namespaces...)); err != nil {
		return "", false, fmt.Errorf("the dev server of %s on %s: %w", dir, address, err)
	}
	return address, started, nil
}

// recorded answers the process ID and port of the server recorded in dir, when that process runs
// this server still; zeros otherwise.
func recorded(dir, store string) (pid, port int) {
	raw, err := os.ReadFile(filepath.Join(dir, pidFile))
	if err != nil {
		return 0, 0
	}
	pid, _ = strconv.Atoi(strings.TrimSpace(string(raw)))
	if pid <= 0 {
		return 0, 0
	}
	if port = runs(pid, store); port == 0 {
		return 0, 0
	}
	return pid, port
}

// runs answers the frontend port of process pid when it is `temporal server start-dev` on store,
// and 0 when it is not (gone, or its ID taken by another program).
func runs(pid int, store string) int {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return 0
	}
	args := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
	flag := func(name string) string {
		if i := slices.Index(args, name); i >= 0 && i+1 < len(args) {
			return args[i+1]
		}
		return ""
	}
	if !slices.Contains(args, "start-dev") || flag("--db-filename") != store {
		return 0
	}
	port, _ := strconv.Atoi(flag("--port"))
	return port
}

// prepare makes each namespace that the server at address lacks, and registers in each the search
// attributes of workflows.SearchAttributes that it lacks.
func prepare(ctx context.Context, address string, namespaces []string) error {
	tc, err := client.DialContext(ctx, client.Options{HostPort: address, Logger: quiet})
	if err != nil {
		return err
	}
	defer tc.Close()
	for _, ns := range namespaces {
		_, err := tc.WorkflowService().DescribeNamespace(ctx, &workflowservice.DescribeNamespaceRequest{Namespace: ns})
		var missing *serviceerror.NamespaceNotFound
		if errors.As(err, &missing) {
			_, err = tc.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
				Namespace: ns, WorkflowExecutionRetentionPeriod: durationpb.New(24 * time.Hour)})
		}
		if err != nil {
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
		// A new namespace reaches every service of the server within seconds (their caches).
		var registered *operatorservice.ListSearchAttributesResponse
		for deadline := time.Now().Add(time.Minute); ; {
			registered, err = tc.OperatorService().ListSearchAttributes(ctx, &operatorservice.ListSearchAttributesRequest{Namespace: ns})
			if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
				break
			}
			time.Sleep(500 * time.Millisecond)
		}
		if err != nil {
			return fmt.Errorf("the search attributes of %s: %w", ns, err)
		}
		add := map[string]enumspb.IndexedValueType{}
		for _, sa := range workflows.SearchAttributes() {
			if _, ok := registered.GetCustomAttributes()[sa.Name]; !ok {
				if add[sa.Name], err = enumspb.IndexedValueTypeFromString(sa.Type); err != nil {
					return fmt.Errorf("search attribute %s: %w", sa.Name, err)
				}
			}
		}
		if len(add) > 0 {
			if _, err := tc.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{Namespace: ns, SearchAttributes: add}); err != nil {
				return fmt.Errorf("adding search attributes to %s: %w", ns, err)
			}
		}
	}
	return nil
}
