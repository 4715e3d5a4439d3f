package chaos

import (
	"github.com/jobbill/jobbill/workflows"

	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	"go.uber.org/zap"

	"github.com/jobbill/jobbill/worker"
)

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

// devServer is the run's own Temporal dev server, on a file store so that a restart keeps every
// workflow, and on ports nobody else uses so that restarting it harms no other test.
type devServer struct {
	bin     string
	port    int
	dbFile  string
	logFile string

	cmd  *exec.Cmd
	done chan struct{}
}

// address is the server's frontend host:port.
func (d *devServer) address() string { return "127.0.0.1:" + strconv.Itoa(d.port) }

// start launches the server and waits until its frontend answers.
func (d *devServer) start(ctx context.Context) error {
	logf, err := os.OpenFile(d.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	args := []string{"server", "start-dev", "--ip", "127.0.0.1",
		"--port", strconv.Itoa(d.port), "--ui-port", strconv.Itoa(d.port + 1000),
		"--db-filename", d.dbFile, "--log-level", "warn", "--headless"}
	cmd := exec.Command(d.bin, append(args, workflows.DevServerFlags()...)...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// The server must not outlive a driver that dies without cleaning up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = logf.Close()
		return fmt.Errorf("starting %s: %w", d.bin, err)
	}
	d.cmd, d.done = cmd, make(chan struct{})
	go func() { _ = cmd.Wait(); _ = logf.Close(); close(d.done) }()
	return waitHealthy(ctx, d.address(), d.done)
}

// stop ends the server gracefully (SIGTERM lets it close its file store), killing it if it takes
// longer than 20 seconds.
func (d *devServer) stop() {
	if d.cmd == nil || d.cmd.Process == nil {
		return
	}
	_ = d.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-d.done:
	case <-time.After(20 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
}

// waitHealthy dials the frontend until it answers (the SDK's dial checks the server's health).
func waitHealthy(ctx context.Context, address string, exited <-chan struct{}) error {
	deadline := time.Now().Add(90 * time.Second)
	for {
		dctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		tc, err := client.DialContext(dctx, client.Options{HostPort: address, Logger: worker.SDKLogger(zap.NewNop())})
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

// workerProc is one `jobbill worker` OS process under supervision: whenever it exits (killed on
// purpose, or failing to start while Temporal or Postgres is down), it is started again, until the
// run stops it.
type workerProc struct {
	id      int
	bin     string
	env     []string
	logFile string
	event   func(kind, format string, args ...any)

	mu       sync.Mutex
	cmd      *exec.Cmd
	killed   bool // the current process was SIGKILLed on purpose
	stopping bool
	done     chan struct{} // closed when the supervisor has returned
}

// supervise runs the worker until stop is called.
func (w *workerProc) supervise() {
	defer close(w.done)
	for {
		w.mu.Lock()
		if w.stopping {
			w.mu.Unlock()
			return
		}
		cmd := exec.Command(w.bin, "worker")
		cmd.Env = w.env
		logf, err := os.OpenFile(w.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err == nil {
			cmd.Stdout, cmd.Stderr = logf, logf
		}
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		startErr := cmd.Start()
		w.cmd, w.killed = cmd, false
		w.mu.Unlock()
		if startErr != nil {
			w.event("worker_exit", "worker %d could not start: %v", w.id, startErr)
		} else {
			waitErr := cmd.Wait()
			w.mu.Lock()
			killed, stopping := w.killed, w.stopping
			w.mu.Unlock()
			if stopping {
				if logf != nil {
					_ = logf.Close()
				}
				return
			}
			if !killed {
				// Not an injection: a worker that cannot reach Temporal or Postgres at start exits.
				w.event("worker_exit", "worker %d (pid %d) exited by itself: %v; restarting it", w.id, cmd.Process.Pid, waitErr)
			}
		}
		if logf != nil {
			_ = logf.Close()
		}
		time.Sleep(300 * time.Millisecond)
		w.mu.Lock()
		if !w.stopping {
			w.mu.Unlock()
			w.event("restart_worker", "worker %d restarting", w.id)
			continue
		}
		w.mu.Unlock()
	}
}

// kill SIGKILLs the current process, as a crash would: no shutdown, in-flight activities lost.
func (w *workerProc) kill() (pid int, ok bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cmd == nil || w.cmd.Process == nil || w.cmd.ProcessState != nil {
		return 0, false
	}
	w.killed = true
	if err := w.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return 0, false
	}
	return w.cmd.Process.Pid, true
}

// stop ends the worker with SIGTERM (a clean stop) and waits for the supervisor.
func (w *workerProc) stop() {
	w.mu.Lock()
	w.stopping = true
	if w.cmd != nil && w.cmd.Process != nil {
		_ = w.cmd.Process.Signal(syscall.SIGTERM)
	}
	w.mu.Unlock()
	select {
	case <-w.done:
	case <-time.After(30 * time.Second):
		w.mu.Lock()
		if w.cmd != nil && w.cmd.Process != nil {
			_ = w.cmd.Process.Kill()
		}
		w.mu.Unlock()
		<-w.done
	}
}
