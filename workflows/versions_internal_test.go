package workflows

import (
	"testing"

	"go.temporal.io/sdk/workflow"
)

// TestBuildIDVersion protects every money rule of the runs in flight: a run's version decides
// which commands it replays, so only a build ID jobbill's worker writes names one. The binary
// checksum an older worker ran under, an operator's own build ID, or a malformed number must read
// as none (the run's marker then says its version), never as a version it was not recorded under.
func TestBuildIDVersion(t *testing.T) {
	if v, ok := buildIDVersion(WorkerBuildID); !ok || v != latestMeteredJobVersion {
		t.Fatalf("WorkerBuildID %q reads as version %d (%v), want %d", WorkerBuildID, v, ok, latestMeteredJobVersion)
	}
	for _, id := range []string{
		"", "30ba45939a4e74efa935641df5a7052f", "2026-12-01.abc", buildIDPrefix, buildIDPrefix + "06",
		buildIDPrefix + "6x", buildIDPrefix + "-6", buildIDPrefix + "+6", "x" + buildIDPrefix + "6",
	} {
		if v, ok := buildIDVersion(id); ok {
			t.Errorf("build ID %q reads as version %d; it names none", id, v)
		}
	}
	if v, ok := buildIDVersion(buildIDPrefix + "7"); !ok || v != workflow.Version(7) {
		t.Errorf("a newer worker's build ID reads as %d (%v), want 7", v, ok)
	}
}
