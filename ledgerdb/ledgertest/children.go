package ledgertest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Children runs one test of the running test binary in processes of its own, as `go test ./...`
// runs packages side by side: the tests that check that tests start the services they need
// themselves (a Postgres cluster here, a Temporal dev server in workertest) run their children
// with it.
type Children struct {
	// Test is the name of the child test.
	Test string
	// Env is the children's environment (EnvWithout makes one).
	Env []string
	// Line matches the line a child prints of the service it used; its three groups are the
	// service's directory, its address, and what the child did to it ("started", "running
	// already"…).
	Line *regexp.Regexp
	// Service names the service, for messages: "cluster", "dev server".
	Service string
}

// ChildService is the service a child used: its directory and its address, as its line says.
type ChildService struct{ Dir, Address string }

// EnvWithout is this process's environment without the variables named.
func EnvWithout(names ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !slices.ContainsFunc(names, func(name string) bool { return strings.HasPrefix(kv, name+"=") }) {
			env = append(env, kv)
		}
	}
	return env
}

// Run runs the child test once, and answers the service it used and what it did to it. It fails
// when the child fails, names no service of its own or did not run its test.
func (c Children) Run() (ChildService, string, error) {
	cmd := exec.Command(os.Args[0], "-test.run=^"+c.Test+"$", "-test.count=1", "-test.v", "-test.timeout=5m")
	cmd.Env = c.Env
	out, err := cmd.CombinedOutput()
	m := c.Line.FindStringSubmatch(string(out))
	switch {
	case err != nil:
		return ChildService{}, "", fmt.Errorf("a test process with no %s set up for it: %w\n%s", c.Service, err, out)
	case m == nil:
		return ChildService{}, "", fmt.Errorf("the child used no %s of its own:\n%s", c.Service, out)
	case !strings.Contains(string(out), "--- PASS: "+c.Test):
		return ChildService{}, "", fmt.Errorf("the child's test did not run:\n%s", out)
	}
	return ChildService{Dir: m[1], Address: m[2]}, m[3], nil
}

// RequireShared runs two children at once, then one more after them, and fails unless the two
// share one service — one of them did first to it (made or started it), the other found it
// running already — and the later one reuses it, running already. It answers the service.
func (c Children) RequireShared(t testing.TB, first string) ChildService {
	t.Helper()
	results := make([]ChildService, 2)
	did := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range results {
		wg.Go(func() { results[i], did[i], errs[i] = c.Run() })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	slices.Sort(did)
	want := []string{first, "running already"}
	slices.Sort(want)
	if !slices.Equal(want, did) || results[0] != results[1] {
		t.Fatalf("two processes started at once did %q to %+v and %+v; want one %s that one process %s, the other waits and uses",
			did, results[0], results[1], c.Service, first)
	}
	t.Logf("the children's %s: %s on %s", c.Service, results[0].Dir, results[0].Address)

	later, laterDid, err := c.Run()
	if err != nil {
		t.Fatal(err)
	}
	if later != results[0] || laterDid != "running already" {
		t.Fatalf("a later process did %q to %+v; want it to reuse the running %s %+v", laterDid, later, c.Service, results[0])
	}
	return results[0]
}
