package jobbill_test

import (
	"regexp"
	"strings"
	"testing"

	"github.com/jobbill/jobbill/ledgerdb"
)

// mermaidBlock matches a page's Mermaid diagrams.
var mermaidBlock = regexp.MustCompile("(?ms)^```mermaid\n(.*?)^```")

// diagramState matches a state of a stateDiagram-v2 declared with its label:
// state "submitting<br/>money pending, net 0" as submitting.
var diagramState = regexp.MustCompile(`(?m)^\s*state "([^"]*)" as (\w+)\s*$`)

// diagramEdge matches a transition of a stateDiagram-v2: from --> to : label.
var diagramEdge = regexp.MustCompile(`(?m)^\s*(\[\*\]|\w+)\s*-->\s*(\[\*\]|\w+)\s*(?::\s*(.*))?$`)

// TestOrientationDiagramHasEveryState holds the picture of a job's money in docs/orientation.md
// to the ledger's state machine: every state of ledgerdb.States is drawn, with an edge into it;
// every state drawn is one of them; each state but deleted tells, in its label, the money state
// ledgerdb.State.MoneyState gives it — the money-state rule, that a user is told where their money
// stands (pending, never "not charged", while the charge may still commit), as the pages draw it;
// and every edge names its ledger function and its guard.
func TestOrientationDiagramHasEveryState(t *testing.T) {
	page := readFile(t, "docs/orientation.md")
	var diagram string
	for _, m := range mermaidBlock.FindAllStringSubmatch(page, -1) {
		if strings.HasPrefix(strings.TrimSpace(m[1]), "stateDiagram-v2") {
			diagram = m[1]
		}
	}
	if diagram == "" {
		t.Fatal("docs/orientation.md has no Mermaid stateDiagram-v2 of a job's states")
	}

	labels := map[string]string{}
	for _, m := range diagramState.FindAllStringSubmatch(diagram, -1) {
		labels[m[2]] = m[1]
	}
	known := map[string]bool{"[*]": true}
	for _, state := range ledgerdb.States {
		known[string(state)] = true
	}
	for name := range labels {
		if !known[name] {
			t.Errorf("the diagram draws %q, which is no state of ledgerdb.States", name)
		}
	}

	entered := map[string]bool{}
	for _, m := range diagramEdge.FindAllStringSubmatch(diagram, -1) {
		from, to, label := m[1], m[2], m[3]
		for _, end := range []string{from, to} {
			if !known[end] {
				t.Errorf("the edge %s --> %s names %q, which is no state of ledgerdb.States", from, to, end)
			}
		}
		entered[to] = true
		if !strings.Contains(label, "(ledger_") {
			t.Errorf("the edge %s --> %s names no ledger function in its label %q", from, to, label)
		}
		if from != "[*]" && !strings.Contains(label, "guard ") {
			t.Errorf("the edge %s --> %s states no guard in its label %q", from, to, label)
		}
	}

	for _, state := range ledgerdb.States {
		name := string(state)
		label, ok := labels[name]
		switch {
		case !ok:
			t.Errorf("state %s of ledgerdb.States is not drawn (state \"%s<br/>money …\" as %s)", name, name, name)
			continue
		case !entered[name]:
			t.Errorf("state %s is drawn, but no edge leads into it", name)
		case !strings.HasPrefix(label, name+"<br/>"):
			t.Errorf("state %s's label %q does not start with its name", name, label)
		}
		if state == ledgerdb.StateDeleted {
			continue // a tombstone keeps the money state it had before deletion
		}
		if want := "money " + string(state.MoneyState()) + ","; !strings.Contains(label, want) {
			t.Errorf("state %s's label %q does not say %q, the money state the ledger tells in it", name, label, want)
		}
	}
}
