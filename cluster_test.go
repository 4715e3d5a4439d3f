package jobbill_test

// Cluster mode (scripts/ensure-temporal-cluster.sh) runs, without Docker, the Temporal server that
// docker-compose.yml describes. These tests keep the two the same server: its version, its
// persistence, its shard count and dynamic config, and the search attributes it registers.

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/jobbill/jobbill/ledgerdb/ledgertest"
	"github.com/jobbill/jobbill/worker/workertest"
	"github.com/jobbill/jobbill/workflows"
)

const (
	clusterScript         = "scripts/ensure-temporal-cluster.sh"
	clusterConfigTemplate = "scripts/cluster/config-template.yaml"
	clusterDynamicConfig  = "scripts/cluster/dynamicconfig.yaml"
)

// composeServerDefaults are the values the temporalio/server image renders for the variables the
// compose file leaves unset: the defaults of the server's embedded config template
// (common/config/config_template_embedded.yaml at the pinned version).
var composeServerDefaults = map[string]string{
	"NUM_HISTORY_SHARDS": "4",
	"DBNAME":             "temporal",
	"VISIBILITY_DBNAME":  "temporal_visibility",
}

// clusterConfig is the part of the server configuration the tests compare.
type clusterConfig struct {
	Persistence struct {
		DefaultStore     string `yaml:"defaultStore"`
		VisibilityStore  string `yaml:"visibilityStore"`
		NumHistoryShards int    `yaml:"numHistoryShards"`
		Datastores       map[string]struct {
			SQL *struct {
				PluginName   string `yaml:"pluginName"`
				DatabaseName string `yaml:"databaseName"`
				User         string `yaml:"user"`
				Password     string `yaml:"password"`
			} `yaml:"sql"`
		} `yaml:"datastores"`
	} `yaml:"persistence"`
	Services map[string]struct {
		RPC struct {
			BindOnIP string `yaml:"bindOnIP"`
		} `yaml:"rpc"`
	} `yaml:"services"`
	DynamicConfigClient struct {
		Filepath string `yaml:"filepath"`
	} `yaml:"dynamicConfigClient"`
}

func readClusterScript(t *testing.T) string { return readScript(t, clusterScript) }

func readScript(t *testing.T, path string) string {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(raw)
}

// scriptArray returns the words of a bash array assignment `name=(a b c)` in the script.
func scriptArray(t *testing.T, script, name string) []string {
	t.Helper()
	m := regexp.MustCompile(`(?m)^` + name + `=\(([^)]*)\)$`).FindStringSubmatch(script)
	require.NotNil(t, m, "the script has no line %s=(...)", name)
	return strings.Fields(m[1])
}

// TestClusterServerVersionMatchesCompose checks that cluster mode installs the Temporal server and
// schema tool of the same release as docker-compose.yml's temporalio/server and
// temporalio/admin-tools images, so that the server run here is the one the compose file runs.
func TestClusterServerVersionMatchesCompose(t *testing.T) {
	m := regexp.MustCompile(`(?m)^server_version=(v\S+)$`).FindStringSubmatch(readClusterScript(t))
	require.NotNil(t, m, "%s has no line server_version=vX.Y.Z", clusterScript)
	f := loadCompose(t)
	for _, name := range []string{"temporal", "temporal-schema", "temporal-init"} {
		require.Equal(t, "v"+imageTag(f.Services[name].Image), m[1],
			"%s's image %s and the server of %s differ", name, f.Services[name].Image, clusterScript)
	}
}

// TestTemporalScriptsMatchWorkflows checks that both ways the scripts run Temporal — the dev
// server and cluster mode — create jobbill's own namespace and the tests' (workflows.
// DefaultNamespace, workertest.DefaultNamespace) and register, in each, exactly the search
// attributes the workflows upsert, in workflows.SearchAttributes()'s name=type form; and that the
// dev server the tests start for themselves (workertest.ServerNamespaces, with the same
// attributes through workflows.DevServerFlags) has the same namespaces.
func TestTemporalScriptsMatchWorkflows(t *testing.T) {
	var want []string
	for _, sa := range workflows.SearchAttributes() {
		want = append(want, sa.Name+"="+sa.Type)
	}
	for _, path := range []string{"scripts/ensure-temporal.sh", clusterScript} {
		script := readScript(t, path)
		require.Equal(t, want, scriptArray(t, script, "search_attributes"),
			"%s must register exactly workflows.SearchAttributes()", path)
		require.Equal(t, []string{workflows.DefaultNamespace, workertest.DefaultNamespace}, scriptArray(t, script, "namespaces"),
			"%s must create jobbill's namespace and the tests'", path)
	}
	require.Equal(t, workertest.ServerNamespaces(), scriptArray(t, readScript(t, "scripts/ensure-temporal.sh"), "namespaces"),
		"the tests' own dev server (worker/workertest) must have the namespaces scripts/ensure-temporal.sh creates")
}

// TestPostgresScriptMakesEveryTestDeployment checks that scripts/ensure-postgres.sh creates a
// database for each test deployment ledgertest knows (ledgertest.Deployments), as the tests' own
// cluster does: a deployment without its database fails only the tests that run worker processes.
func TestPostgresScriptMakesEveryTestDeployment(t *testing.T) {
	require.Equal(t, ledgertest.Deployments(), scriptArray(t, readScript(t, "scripts/ensure-postgres.sh"), "test_deployments"))
}

// TestClusterConfigMatchesCompose checks the server configuration of cluster mode against the
// compose file's server: the same persistence plugin, databases and credentials for the default
// and visibility stores, the same number of history shards, the same dynamic config values, and
// every service bound to 127.0.0.1. It also checks that the script fills every placeholder of the
// template.
func TestClusterConfigMatchesCompose(t *testing.T) {
	raw, err := os.ReadFile(clusterConfigTemplate)
	require.NoError(t, err)
	var c clusterConfig
	require.NoError(t, yaml.Unmarshal([]byte(withDefaultDatabases(t, string(raw))), &c), "%s does not parse", clusterConfigTemplate)

	f := loadCompose(t)
	server := f.Services["temporal"].Environment
	env := func(key string) string {
		if v, ok := server[key]; ok {
			return v
		}
		return composeServerDefaults[key]
	}

	require.Equal(t, env("NUM_HISTORY_SHARDS"), strconv.Itoa(c.Persistence.NumHistoryShards),
		"numHistoryShards differs from the compose file's server")
	stores := map[string]string{
		c.Persistence.DefaultStore:    env("DBNAME"),
		c.Persistence.VisibilityStore: env("VISIBILITY_DBNAME"),
	}
	require.Len(t, stores, 2, "the default and visibility stores are two datastores")
	for store, database := range stores {
		ds, ok := c.Persistence.Datastores[store]
		require.True(t, ok, "datastore %s is not defined", store)
		require.NotNil(t, ds.SQL, "datastore %s is not SQL", store)
		require.Equal(t, env("DB"), ds.SQL.PluginName, "datastore %s's plugin", store)
		require.Equal(t, database, ds.SQL.DatabaseName, "datastore %s's database", store)
		require.Equal(t, env("POSTGRES_USER"), ds.SQL.User, "datastore %s's user", store)
		require.Equal(t, env("POSTGRES_PWD"), ds.SQL.Password, "datastore %s's password", store)
	}

	require.NotEmpty(t, c.Services)
	for name, s := range c.Services {
		require.Equal(t, "127.0.0.1", s.RPC.BindOnIP, "service %s must listen on 127.0.0.1 only", name)
	}

	// The dynamic config: the compose server reads the file DYNAMIC_CONFIG_FILE_PATH names, mounted
	// from the repository, or else the image's default, which is empty.
	script := readClusterScript(t)
	require.Equal(t, "${DYNAMIC_CONFIG_FILE}", c.DynamicConfigClient.Filepath)
	require.True(t, strings.Contains(script, "dynamic_config=$PWD/scripts/cluster/dynamicconfig.yaml"),
		"%s must point the server at %s", clusterScript, clusterDynamicConfig)
	composeDynamic := map[string]any{}
	if path, ok := server["DYNAMIC_CONFIG_FILE_PATH"]; ok {
		composeDynamic = readDynamicConfig(t, composeMountSource(t, f.Services["temporal"], path))
	}
	clusterDynamic := readDynamicConfig(t, clusterDynamicConfig)
	require.Equal(t, composeDynamic, clusterDynamic,
		"%s must hold the dynamic config of the compose file's server", clusterDynamicConfig)

	// Every ${NAME} of the template, outside its comments, is replaced by the script's render_config.
	placeholder := regexp.MustCompile(`\$\{([A-Z_]+)\}`)
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		for _, m := range placeholder.FindAllStringSubmatch(line, -1) {
			require.True(t, strings.Contains(script, `s|\${`+m[1]+`}|`), "%s does not fill ${%s}", clusterScript, m[1])
		}
	}
}

// withDefaultDatabases fills the template's database placeholders as the script does when
// JOBBILL_CLUSTER_DATABASE is unset: a second server beside the first takes databases of its own,
// but the default ones must be the compose file's.
func withDefaultDatabases(t *testing.T, template string) string {
	t.Helper()
	script := readClusterScript(t)
	m := regexp.MustCompile(`(?m)^database=\$\{JOBBILL_CLUSTER_DATABASE:-([a-z_]+)\}$`).FindStringSubmatch(script)
	require.NotNil(t, m, "%s has no line database=${JOBBILL_CLUSTER_DATABASE:-name}", clusterScript)
	require.Contains(t, script, "\nvisibility_database=${database}_visibility\n")
	return strings.NewReplacer("${DATABASE}", m[1], "${VISIBILITY_DATABASE}", m[1]+"_visibility").Replace(template)
}

// composeMountSource returns the repository path a service mounts at a container path.
func composeMountSource(t *testing.T, s composeService, containerPath string) string {
	t.Helper()
	for _, v := range s.Volumes {
		parts := strings.Split(v, ":")
		if len(parts) >= 2 && parts[1] == containerPath && strings.HasPrefix(parts[0], "./") {
			return parts[0]
		}
	}
	t.Fatalf("DYNAMIC_CONFIG_FILE_PATH %s is not a file mounted from the repository", containerPath)
	return ""
}

// readDynamicConfig parses a dynamic config file into its keys and values; an empty file (or one
// of comments only) is no values.
func readDynamicConfig(t *testing.T, path string) map[string]any {
	t.Helper()
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	values := map[string]any{}
	require.NoError(t, yaml.Unmarshal(raw, &values), "%s does not parse", path)
	return values
}
