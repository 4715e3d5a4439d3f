package chaos

import (
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

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
