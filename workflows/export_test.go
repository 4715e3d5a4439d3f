package workflows

// What the external tests (package workflows_test) name of the package's unexported versions
// (versions.go), to run a recorded version's branch with the test environment's OnGetVersion.
const (
	// MeteredJobVersionID is meteredJobVersionID.
	MeteredJobVersionID = meteredJobVersionID
	// LatestMeteredJobVersion is latestMeteredJobVersion.
	LatestMeteredJobVersion = latestMeteredJobVersion
	// VersionContract is versionContract, the last version before whole numbers.
	VersionContract = versionContract
	// VersionLedgerTruth is versionLedgerTruth, the last version that recorded a Version marker.
	VersionLedgerTruth = versionLedgerTruth
)
