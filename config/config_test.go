package config_test

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/jobbill/jobbill/config"
)

// TestSettingsCoverEveryKey keeps config.Settings, and so the configuration table in
// docs/configuration.md, complete: every key viper knows is listed once, with its JOBBILL_
// variable.
func TestSettingsCoverEveryKey(t *testing.T) {
	v := config.NewViper()
	known := v.AllKeys()
	var listed []string
	for _, s := range config.Settings() {
		listed = append(listed, s.Key)
		require.Equal(t, config.EnvName(s.Key), s.Env)
	}
	sort.Strings(known)
	sort.Strings(listed)
	require.Equal(t, known, listed)
}

// TestEnvironmentOverridesDefaults checks that a JOBBILL_ variable reaches the decoded Config,
// durations included, and that the defaults hold otherwise.
func TestEnvironmentOverridesDefaults(t *testing.T) {
	t.Setenv("JOBBILL_POLICY_MAXIMUM_ATTEMPTS", "5")
	t.Setenv("JOBBILL_POLICY_START_TO_CLOSE", "90s")
	t.Setenv("JOBBILL_TEMPORAL_ADDRESS", "temporal.internal:7233")
	c, err := config.Load(config.NewViper())
	require.NoError(t, err)
	require.Equal(t, int32(5), c.Policy.MaximumAttempts)
	require.Equal(t, 90*time.Second, c.Policy.StartToClose)
	require.Equal(t, "temporal.internal:7233", c.Temporal.Address)
	require.Equal(t, config.Default().DatabaseURL, c.DatabaseURL)
	require.Equal(t, c.Policy.MaximumAttempts, c.Policy.WithDefaults().MaximumAttempts)
}

// TestInvalidConfigurationIsRefused checks that a configuration that cannot work is refused with
// the key named, before anything starts.
func TestInvalidConfigurationIsRefused(t *testing.T) {
	for env, key := range map[string]string{
		"JOBBILL_LOG_LEVEL":                     "log.level",
		"JOBBILL_RUNNER_KIND":                   "runner.kind",
		"JOBBILL_RUNNER_SIMULATED_FAILURE_RATE": "runner.simulated.failure_rate",
		"JOBBILL_API_RATE_LIMIT_PER_SECOND":     "api.rate_limit.per_second",
		"JOBBILL_API_RATE_LIMIT_BURST":          "api.rate_limit.burst",
		"JOBBILL_API_CONSOLE_RATE_LIMIT_BURST":  "api.console_rate_limit.burst",
		"JOBBILL_TEMPORAL_WORKFLOW_CACHE_SIZE":  "temporal.workflow_cache_size",
		"JOBBILL_EXPIRY_INTERVAL":               "expiry.interval",
	} {
		t.Run(key, func(t *testing.T) {
			t.Setenv(env, map[string]string{
				"JOBBILL_LOG_LEVEL": "loud", "JOBBILL_RUNNER_KIND": "quantum", "JOBBILL_RUNNER_SIMULATED_FAILURE_RATE": "1.5",
				"JOBBILL_API_RATE_LIMIT_PER_SECOND": "-1", "JOBBILL_API_RATE_LIMIT_BURST": "0", "JOBBILL_API_CONSOLE_RATE_LIMIT_BURST": "0",
				"JOBBILL_TEMPORAL_WORKFLOW_CACHE_SIZE": "0", "JOBBILL_EXPIRY_INTERVAL": "500ms",
			}[env])
			_, err := config.Load(config.NewViper())
			require.ErrorContains(t, err, key)
		})
	}
}

// TestDocsListEverySetting keeps the configuration table in docs/configuration.md true: each key
// appears with its environment variable and its default.
func TestDocsListEverySetting(t *testing.T) {
	page, err := os.ReadFile("../docs/configuration.md")
	require.NoError(t, err)
	for _, s := range config.Settings() {
		def := "`" + s.Default + "`"
		if s.Default == "" {
			def = "(none)"
		}
		row := "| `" + s.Key + "` | `" + s.Env + "` | " + def + " |"
		require.True(t, strings.Contains(string(page), row), "docs/configuration.md lacks the row %s", row)
	}
}

// TestAPIKeysFromOneVariable checks that JOBBILL_API_KEYS ("key=admin;key=admin") decodes to
// the bootstrap admin keys, and that a bad key is refused by position without its secret
// appearing in the error.
func TestAPIKeysFromOneVariable(t *testing.T) {
	t.Setenv("JOBBILL_API_KEYS", "key-for-admin-000001=admin; key-for-admin-000002=admin")
	c, err := config.Load(config.NewViper())
	require.NoError(t, err)
	require.Equal(t, []config.APIKey{
		{Key: "key-for-admin-000001", Admin: true},
		{Key: "key-for-admin-000002", Admin: true},
	}, c.API.Keys)
	require.NotContains(t, fmt.Sprint(c), "key-for-admin-000001", "printing a Config must not print a key")

	t.Setenv("JOBBILL_API_KEYS", "short-secret=admin")
	_, err = config.Load(config.NewViper())
	require.ErrorContains(t, err, "api.keys[0]")
	require.NotContains(t, err.Error(), "short-secret")
}

// TestAccountKeysInConfigurationRefused checks the trust rule that the configuration bootstraps
// admin access only: a key the configuration gives accounts — how account keys were configured
// before they moved to the ledger's database — is refused at start, by position and without its
// secret, with the command that replaces it; never read as an admin key, which would open every
// account to its holder, nor dropped unnoticed. So is a key with both accounts and admin.
func TestAccountKeysInConfigurationRefused(t *testing.T) {
	for _, value := range []string{
		"key-for-admin-000001=admin;key-for-acme-0000001=acme",
		"key-for-admin-000001=admin;key-for-acme-0000001=acme,admin",
	} {
		t.Setenv("JOBBILL_API_KEYS", value)
		_, err := config.Load(config.NewViper())
		require.ErrorContains(t, err, "api.keys[1]: the configuration holds bootstrap admin keys only", value)
		require.ErrorContains(t, err, "jobbill key create --scope customer --account ACCOUNT", value)
		require.NotContains(t, err.Error(), "key-for-acme-0000001", value)
	}
}
