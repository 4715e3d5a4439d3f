// Package devdir is where a checkout keeps the state of the services it runs for itself: the
// git-ignored .dev directory at the checkout's root (the dev server's store of `make run`, logs,
// and the Postgres cluster and Temporal dev server the tests start when no URL names one), and
// the file lock that lets the test processes of one `go test ./...` run, each a process of its
// own, share those services: one starts them, the others wait for it and reuse them.
package devdir

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Module is the module path whose go.mod marks a checkout's root.
const Module = "github.com/jobbill/jobbill"

// Root is the checkout's root: the nearest directory, from the working directory up, whose go.mod
// declares [Module]. A test runs in its package's directory, so every test process of a checkout
// finds the same root.
func Root() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if declaresModule(filepath.Join(dir, "go.mod")) {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod of %s in the working directory or above it: run from inside the checkout", Module)
		}
		dir = parent
	}
}

// declaresModule reports whether the go.mod at path declares Module.
func declaresModule(path string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if fields := strings.Fields(s.Text()); len(fields) == 2 && fields[0] == "module" {
			return fields[1] == Module
		}
	}
	return false
}

// Dir is the checkout's .dev directory, made when it is missing.
func Dir() (string, error) {
	root, err := Root()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(root, ".dev")
	return dir, os.MkdirAll(dir, 0o755)
}

// TestServicesEnv names the directory where the tests keep the services they start for
// themselves, when set; [TestServices] says what it defaults to.
const TestServicesEnv = "JOBBILL_TEST_SERVICES_DIR"

// TestServices is the directory of the services the tests start when no URL names one
// (ledgertest's Postgres cluster, workertest's dev server): JOBBILL_TEST_SERVICES_DIR (a relative
// path is from the checkout's root, as scripts/test-services.sh reads it, not from each test's
// package), or the checkout's .dev. It is made when it is missing.
func TestServices() (string, error) {
	dir := os.Getenv(TestServicesEnv)
	if dir == "" {
		return Dir()
	}
	if !filepath.IsAbs(dir) {
		root, err := Root()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, dir)
	}
	return dir, os.MkdirAll(dir, 0o755)
}

// Lock takes the exclusive lock of path (a file, made when missing), waiting for whoever holds
// it, and answers the function that releases it. The lock is the kernel's (flock), so a holder
// that dies releases it with its process: a crash never leaves the services locked.
func Lock(path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = f.Close() }, nil
}
