// Package devserver runs a Temporal dev server (`temporal server start-dev`) of a caller's own: on
// free ports, with a file store that survives a stop, ready for jobbill (its namespace and search
// attributes, workflows.DevServerFlags). Callers that must stop and start Temporal on purpose — the
// chaos run, the tests of what jobbill does while Temporal is down — use it so that they never
// touch the shared dev server other tests and people rely on.
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
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/log"

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
	cmd := exec.Command(s.Binary, append(args, workflows.DevServerFlags()...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server must not outlive a caller that dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", s.Binary, err)
	}
	s.cmd, s.done = cmd, make(chan struct{})
	done := s.done
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(done) }()
	return waitHealthy(ctx, s.Address(), done)
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

// waitHealthy dials the frontend until it answers (the SDK's dial checks the server's health).
func waitHealthy(ctx context.Context, address string, exited <-chan struct{}) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		tc, err := client.DialContext(dctx, client.Options{HostPort: address, Logger: log.NewStructuredLogger(slog.New(slog.DiscardHandler))})
		cancel()
		if err == nil {
			tc.Close()
			return nil
		}
		select {
		case <-exited:
			return fmt.Errorf("the Temporal dev server on %s exited before it was healthy", address)
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Temporal dev server on %s did not become healthy: %w", address, err)
		}
	}
}
