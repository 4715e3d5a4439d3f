// The repository's root holds the deployment files — docker-compose.yml, the Dockerfile — and
// scripts/ beside them, and the pages (README.md, docs/); the tests of this package check those
// files, where they are, against the configuration, the workflows and the code they name.
package jobbill_test

// Docker does not run on the build machines, so these tests keep docker-compose.yml and the
// Dockerfile honest by reading them: every service's image or build, its ports, the order its
// dependencies impose, and the environment of jobbill's services against config.Config.

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/jobbill/jobbill/config"
	"github.com/jobbill/jobbill/workflows"
)

// composeFile is the part of the Compose specification the tests read.
type composeFile struct {
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	// Extensions are the top-level x-* blocks (the shared environment), merged into services.
	Extensions map[string]any `yaml:",inline"`
}

type composeService struct {
	Image       string                      `yaml:"image"`
	Build       any                         `yaml:"build"`
	Command     []string                    `yaml:"command"`
	Entrypoint  []string                    `yaml:"entrypoint"`
	Environment map[string]string           `yaml:"environment"`
	Ports       []string                    `yaml:"ports"`
	Volumes     []string                    `yaml:"volumes"`
	DependsOn   map[string]composeDependsOn `yaml:"depends_on"`
	Healthcheck *struct {
		Test        []string `yaml:"test"`
		Interval    string   `yaml:"interval"`
		Timeout     string   `yaml:"timeout"`
		Retries     int      `yaml:"retries"`
		StartPeriod string   `yaml:"start_period"`
	} `yaml:"healthcheck"`
	Deploy struct {
		Replicas int `yaml:"replicas"`
	} `yaml:"deploy"`
	Restart         string `yaml:"restart"`
	StopGracePeriod string `yaml:"stop_grace_period"`
}

type composeDependsOn struct {
	Condition string `yaml:"condition"`
}

// loadCompose parses docker-compose.yml strictly: a key these types do not know (a misspelt
// depend_on) is an error rather than a silently missing dependency. yaml.v3 resolves the file's
// `<<: *anchor` merges.
func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	var f composeFile
	dec := yaml.NewDecoder(strings.NewReader(string(raw)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&f), "docker-compose.yml does not parse, or uses a key these tests do not know")
	for key := range f.Extensions {
		require.True(t, strings.HasPrefix(key, "x-"), "unexpected top-level key %q", key)
	}
	return f
}

// The services docker-compose.yml must define; jobbill's are built from the Dockerfile.
var (
	jobbillServices = []string{"migrate", "worker", "api"}
	allServices     = []string{"postgres", "migrate", "temporal-postgres", "temporal-schema", "temporal",
		"temporal-init", "temporal-ui", "worker", "api"}
)

// TestComposeImagesAndBuilds checks that every service either runs a pinned image or is jobbill
// built from the repository's Dockerfile, with the subcommand it is for.
func TestComposeImagesAndBuilds(t *testing.T) {
	f := loadCompose(t)
	var names []string
	for name := range f.Services {
		names = append(names, name)
	}
	sort.Strings(names)
	want := slices.Clone(allServices)
	sort.Strings(want)
	require.Equal(t, want, names)

	pinned := regexp.MustCompile(`^[a-z0-9./-]+:[0-9][A-Za-z0-9._-]*$`)
	for name, s := range f.Services {
		if slices.Contains(jobbillServices, name) {
			require.Empty(t, s.Image, "%s: jobbill is built, not pulled", name)
			require.Equal(t, ".", s.Build, "%s: built from the repository's Dockerfile", name)
			require.Len(t, s.Command, 1, "%s: one jobbill subcommand", name)
			require.Equal(t, name, s.Command[0], "%s runs `jobbill %s`", name, name)
			continue
		}
		require.Nil(t, s.Build, "%s: only jobbill is built here", name)
		// A version, not :latest or a bare name: `docker compose up` must mean the same thing tomorrow.
		require.Regexp(t, pinned, s.Image, "%s: pin the image to a version", name)
	}
	require.Equal(t, 2, f.Services["worker"].Deploy.Replicas, "two workers share the task queue")
	for _, name := range []string{"temporal-schema", "temporal-init"} {
		require.Contains(t, f.Services[name].Image, "temporalio/admin-tools:")
	}
	require.Contains(t, f.Services["temporal"].Image, "temporalio/server:")
	require.Contains(t, f.Services["temporal-ui"].Image, "temporalio/ui:")
	// Temporal's server and its tools are the same release: the schema tool writes what the server reads.
	require.Equal(t, imageTag(f.Services["temporal"].Image), imageTag(f.Services["temporal-schema"].Image))
	require.Equal(t, imageTag(f.Services["temporal"].Image), imageTag(f.Services["temporal-init"].Image))
	// Named volumes keep both databases across `docker compose down`; a file of the repository
	// (the ledger's init script, which creates the application role) is bind-mounted read-only.
	for _, name := range []string{"postgres", "temporal-postgres"} {
		for _, v := range f.Services[name].Volumes {
			vol, _, _ := strings.Cut(v, ":")
			if strings.HasPrefix(vol, "./") {
				_, err := os.Stat(vol)
				require.NoError(t, err, "%s mounts a file the repository does not have", name)
				require.True(t, strings.HasSuffix(v, ":ro"), "%s: mount %s read-only", name, vol)
				continue
			}
			require.Contains(t, f.Volumes, vol, "%s mounts an undeclared volume", name)
		}
		require.NotEmpty(t, f.Services[name].Volumes, "%s keeps its data in a volume", name)
	}
}

func imageTag(image string) string { _, tag, _ := strings.Cut(image, ":"); return tag }

// publishedPort is one entry of a service's ports: [ip:]host:container.
type publishedPort struct{ ip, host, container string }

func parsePort(t *testing.T, service, p string) publishedPort {
	t.Helper()
	parts := strings.Split(p, ":")
	switch len(parts) {
	case 2:
		return publishedPort{host: parts[0], container: parts[1]}
	case 3:
		return publishedPort{ip: parts[0], host: parts[1], container: parts[2]}
	}
	t.Fatalf("%s: publish [ip:]host:container explicitly, not %q", service, p)
	return publishedPort{}
}

// TestComposePublishesOnlyTheAPI checks what the host's network reaches (trust: whoever reaches
// Temporal is trusted product code that can start, signal and terminate any job's workflow, and
// whoever reaches the ledger's Postgres holds its passwords): the API's port alone, and the
// Temporal Web UI on the host's loopback interface only. The ledger's Postgres and Temporal's
// frontend are not published at all: the services reach them on the compose network, and an
// operator through `docker compose exec`.
func TestComposePublishesOnlyTheAPI(t *testing.T) {
	f := loadCompose(t)
	for name, s := range f.Services {
		switch name {
		case "api":
			require.Len(t, s.Ports, 1, "the api publishes its one port")
			p := parsePort(t, name, s.Ports[0])
			require.Equal(t, "8080", p.host, "the API on the host's port 8080, as the docs' commands expect")
			// The API listens, inside its container, on the port that is published.
			require.Equal(t, "0.0.0.0:"+p.container, s.Environment["JOBBILL_API_LISTEN"],
				"the API must listen on all interfaces of its container, on the published port")
		case "temporal-ui":
			require.Len(t, s.Ports, 1, "the UI publishes its one port")
			p := parsePort(t, name, s.Ports[0])
			require.Equal(t, "127.0.0.1", p.ip, "the Temporal UI can terminate any job's workflow: bind it to the host's loopback only")
			require.Equal(t, "8233", p.host, "8233 on the host, as the dev server's UI, so temporal.ui_url's links work either way")
		default:
			require.Empty(t, s.Ports, "%s must not be published: the services reach it on the compose network", name)
		}
	}
	require.Equal(t, "http://127.0.0.1:8233", config.Default().Temporal.UIURL)
}

// secretVariable names what holds a secret: a key, a password, a token.
var secretVariable = regexp.MustCompile(`(?i)(KEY|SECRET|TOKEN|PASSWORD|PWD)`)

// TestComposeHasNoDefaultSecret checks that `docker compose up` never starts an API that a
// published default lets anyone into (trust: an admin key grants credits and acts for every
// account): the API's keys come from the host alone — the admin key from JOBBILL_ADMIN_KEY, which
// Compose refuses to start without (${VAR:?message}) — no interpolation of a secret has a default,
// and no key is written into the file. JOBBILL_ADMIN_KEY is Compose's, not a setting of
// config.Config, so it cannot be mistaken for one.
func TestComposeHasNoDefaultSecret(t *testing.T) {
	raw, err := os.ReadFile("docker-compose.yml")
	require.NoError(t, err)
	for _, m := range interpolation.FindAllStringSubmatch(string(raw), -1) {
		if secretVariable.MatchString(m[1]) && m[2] == "-" {
			require.Empty(t, m[3], "${%s} has a default secret; a secret must come from the host", m[1])
		}
	}

	keys := loadCompose(t).Services["api"].Environment["JOBBILL_API_KEYS"]
	require.Regexp(t, `\$\{JOBBILL_ADMIN_KEY:\?[^}]+\}=admin`, keys,
		"the admin key comes from the host's JOBBILL_ADMIN_KEY, and Compose refuses to start without it, with a message")
	// With every variable taken out, no key is left: nothing in the file is a key.
	literal := interpolation.ReplaceAllString(keys, "")
	parsed, err := config.ParseAPIKeys(literal)
	if err == nil {
		for _, k := range parsed {
			require.Empty(t, k.Key, "JOBBILL_API_KEYS holds a key written into the file")
		}
	}
	for _, s := range config.Settings() {
		require.NotEqual(t, "JOBBILL_ADMIN_KEY", s.Env, "JOBBILL_ADMIN_KEY is the compose file's variable; a setting of the same name would be read two ways")
	}
	// Only the variable the compose file documents is read from the host.
	for _, m := range interpolation.FindAllStringSubmatch(string(raw), -1) {
		require.Equal(t, "JOBBILL_ADMIN_KEY", m[1], "an undocumented host variable")
	}
}

// TestComposeStartOrder checks the dependencies: each target exists with the condition that makes
// the order right (postgres healthy → migrate completed → worker/api; temporal-postgres healthy →
// temporal-schema completed → temporal healthy → temporal-init completed → worker/api), a
// healthy condition only on a service with a healthcheck, and no cycle.
func TestComposeStartOrder(t *testing.T) {
	f := loadCompose(t)
	want := map[string]map[string]string{
		"postgres":          {},
		"migrate":           {"postgres": "service_healthy"},
		"temporal-postgres": {},
		"temporal-schema":   {"temporal-postgres": "service_healthy"},
		"temporal":          {"temporal-schema": "service_completed_successfully"},
		"temporal-init":     {"temporal": "service_healthy"},
		"temporal-ui":       {"temporal": "service_healthy"},
		"worker":            {"migrate": "service_completed_successfully", "temporal-init": "service_completed_successfully"},
		"api":               {"migrate": "service_completed_successfully", "temporal-init": "service_completed_successfully"},
	}
	for name, s := range f.Services {
		got := map[string]string{}
		for target, dep := range s.DependsOn {
			require.Contains(t, f.Services, target, "%s depends on a service that does not exist", name)
			got[target] = dep.Condition
			switch dep.Condition {
			case "service_healthy":
				require.NotNil(t, f.Services[target].Healthcheck, "%s waits for %s to be healthy, which has no healthcheck", name, target)
			case "service_completed_successfully":
				// A one-shot: restarted forever, it would never complete.
				require.NotContains(t, []string{"always", "unless-stopped"}, f.Services[target].Restart, "%s waits for %s to complete", name, target)
			default:
				t.Errorf("%s → %s: condition %q; use service_healthy or service_completed_successfully", name, target, dep.Condition)
			}
		}
		require.Equal(t, want[name], got, "%s's dependencies", name)
	}
	// No cycle: a depth-first walk never meets a service it is still inside of.
	state := map[string]int{} // 0 unseen, 1 on the path, 2 done
	var visit func(name string, path []string)
	visit = func(name string, path []string) {
		switch state[name] {
		case 1:
			t.Fatalf("depends_on cycle: %s", strings.Join(append(path, name), " → "))
		case 2:
			return
		}
		state[name] = 1
		for target := range f.Services[name].DependsOn {
			visit(target, append(path, name))
		}
		state[name] = 2
	}
	for name := range f.Services {
		visit(name, nil)
	}
	// Every jobbill process that talks to both starts after both are ready, transitively.
	for _, name := range []string{"worker", "api"} {
		deps := transitiveDeps(f, name)
		for _, need := range []string{"postgres", "migrate", "temporal-postgres", "temporal-schema", "temporal", "temporal-init"} {
			require.Contains(t, deps, need, "%s starts before %s is ready", name, need)
		}
	}
}

func transitiveDeps(f composeFile, name string) map[string]bool {
	seen := map[string]bool{}
	var walk func(string)
	walk = func(n string) {
		for target := range f.Services[n].DependsOn {
			if !seen[target] {
				seen[target] = true
				walk(target)
			}
		}
	}
	walk(name)
	return seen
}

// interpolation is Compose's ${VAR}, ${VAR:-default} and ${VAR:?message}.
var interpolation = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::?([-?])([^}]*))?\}`)

// interpolate is what `docker compose up` sets a value to on a host that sets none of the
// variables: each default, and an error for a variable without one.
func interpolate(t *testing.T, service, key, value string) string {
	t.Helper()
	return interpolation.ReplaceAllStringFunc(value, func(m string) string {
		parts := interpolation.FindStringSubmatch(m)
		switch parts[2] {
		case "-":
			return parts[3]
		case "?":
			// Required from the host on purpose; the test stands in for it with a value that
			// passes the setting's checks (an API key of 16 characters or more).
			return "stand-in-for-" + strings.ToLower(parts[1])
		default:
			t.Errorf("%s: %s=%s has no default; `docker compose up` would set it empty", service, key, value)
			return ""
		}
	})
}

// TestComposeEnvironmentMatchesConfig checks each jobbill service's environment against
// config.Config: every JOBBILL_* variable is a real setting (a typo would be ignored silently and
// leave a default in place), the required ones are set, the whole environment loads and
// validates as the process would load it, and it points at the compose file's own services —
// the migrate service at the ledger as its owner, the worker and the API as the application role
// that the ledger's init script creates, without the owner's credentials (least privilege).
func TestComposeEnvironmentMatchesConfig(t *testing.T) {
	f := loadCompose(t)
	settings := map[string]bool{}
	for _, s := range config.Settings() {
		settings[s.Env] = true
	}
	required := map[string][]string{
		"migrate": {"JOBBILL_MIGRATE_DATABASE_URL"},
		"worker":  {"JOBBILL_DATABASE_URL", "JOBBILL_TEMPORAL_ADDRESS"},
		"api":     {"JOBBILL_DATABASE_URL", "JOBBILL_TEMPORAL_ADDRESS", "JOBBILL_API_KEYS", "JOBBILL_API_LISTEN"},
	}
	pg := f.Services["postgres"].Environment
	ownerURL := fmt.Sprintf("postgres://%s:%s@postgres:5432/%s?sslmode=disable", pg["POSTGRES_USER"], pg["POSTGRES_PASSWORD"], pg["POSTGRES_DB"])
	appURL := fmt.Sprintf("postgres://jobbill_app:%s@postgres:5432/%s?sslmode=disable", pg["LEDGER_APP_PASSWORD"], pg["POSTGRES_DB"])
	require.NotEmpty(t, pg["LEDGER_APP_PASSWORD"], "the postgres service's init script needs the application role's password")
	namespace := f.Services["temporal-init"].Environment["TEMPORAL_NAMESPACE"]
	require.Equal(t, workflows.DefaultNamespace, namespace, "compose must create jobbill's own namespace, which no other program shares")
	queues := map[string]bool{}
	for _, name := range jobbillServices {
		t.Run(name, func(t *testing.T) {
			env := f.Services[name].Environment
			for key := range env {
				require.True(t, strings.HasPrefix(key, "JOBBILL_"), "%s: %s is not jobbill's to read", name, key)
				require.True(t, settings[key], "%s: %s is not a setting of config.Config (see config.Settings)", name, key)
			}
			for _, key := range required[name] {
				require.NotEmpty(t, env[key], "%s needs %s", name, key)
			}
			// Load as the process does, with nothing from this machine's environment leaking in.
			for key := range settings {
				t.Setenv(key, "")
			}
			for key, value := range env {
				t.Setenv(key, interpolate(t, name, key, value))
			}
			c, err := config.Load(config.NewViper())
			require.NoError(t, err, "%s's environment does not load", name)
			if name == "migrate" {
				require.Equal(t, ownerURL, c.MigrateDatabaseURL, "migrate must run as the ledger's owner")
				return
			}
			require.Equal(t, appURL, c.DatabaseURL, "%s must use the compose file's ledger as the application role", name)
			require.NotContains(t, env, "JOBBILL_MIGRATE_DATABASE_URL", "%s must not hold the owner's credentials", name)
			require.Equal(t, "temporal:7233", c.Temporal.Address)
			require.Equal(t, namespace, c.Temporal.Namespace, "%s must use the namespace temporal-init creates", name)
			queues[c.Temporal.TaskQueue] = true
			if name == "api" {
				// A fresh stack has no keys in its ledger yet: its bootstrap admin key is the way in.
				require.NotEmpty(t, c.API.Keys, "the api service needs a bootstrap admin key")
			}
		})
	}
	require.Len(t, queues, 1, "the API starts jobs on the queue the workers poll")
}

// TestComposeTemporalSetup checks Temporal's side: the server and the schema tool use the same
// Postgres with the same credentials, and the search attributes registered at start are exactly
// those the workflows upsert.
func TestComposeTemporalSetup(t *testing.T) {
	f := loadCompose(t)
	db := f.Services["temporal-postgres"].Environment
	server := f.Services["temporal"].Environment
	require.Equal(t, "postgres12", server["DB"])
	require.Equal(t, "temporal-postgres", server["POSTGRES_SEEDS"])
	require.Equal(t, db["POSTGRES_USER"], server["POSTGRES_USER"])
	require.Equal(t, db["POSTGRES_PASSWORD"], server["POSTGRES_PWD"])
	schema := f.Services["temporal-schema"]
	require.Equal(t, "temporal-postgres", schema.Environment["SQL_HOST"])
	require.Equal(t, db["POSTGRES_USER"], schema.Environment["SQL_USER"])
	require.Equal(t, db["POSTGRES_PASSWORD"], schema.Environment["SQL_PASSWORD"])
	script := strings.Join(schema.Command, "\n")
	for _, want := range []string{"temporal_visibility", "setup-schema", "update-schema", "postgresql/v12"} {
		require.Contains(t, script, want, "temporal-schema must set up both databases' schemas")
	}

	init := f.Services["temporal-init"]
	require.Equal(t, "temporal:7233", init.Environment["TEMPORAL_ADDRESS"])
	var want []string
	for _, sa := range workflows.SearchAttributes() {
		want = append(want, sa.Name+"="+sa.Type)
	}
	require.Equal(t, want, strings.Fields(init.Environment["SEARCH_ATTRIBUTES"]),
		"temporal-init must register exactly workflows.SearchAttributes()")
	script = strings.Join(init.Command, "\n")
	// $$ is Compose's escape: the shell, not Compose, expands the list.
	for _, want := range []string{"$$SEARCH_ATTRIBUTES", "search-attribute create", "search-attribute list", "namespace create", "cluster health"} {
		require.Contains(t, script, want)
	}
	require.Equal(t, []string{"/bin/sh", "-euc"}, init.Entrypoint, "the script stops at its first failure")
}

// TestDockerfile checks the image the jobbill services are built from: multi-stage, a static
// build of ./cmd/jobbill and nothing else (the tooling, which restarts Postgres in the chaos
// run, stays out), pinned base images, and a runtime stage that is not root.
func TestDockerfile(t *testing.T) {
	raw, err := os.ReadFile("Dockerfile")
	require.NoError(t, err)
	var froms []string
	var runtime []string // the last stage's instructions
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if fields := strings.Fields(line); strings.EqualFold(fields[0], "FROM") {
			froms = append(froms, fields[1])
			runtime = nil
		}
		runtime = append(runtime, line)
	}
	require.GreaterOrEqual(t, len(froms), 2, "build and runtime stages: the toolchain stays out of the image")
	for _, image := range froms {
		tag := imageTag(image)
		require.NotEmpty(t, tag, "pin %s", image)
		require.NotEqual(t, "latest", tag, "pin %s", image)
	}
	text := string(raw)
	require.Regexp(t, `CGO_ENABLED=0 go build .*\./cmd/jobbill\n`, text)
	require.Equal(t, 1, strings.Count(text, "go build"), "the image builds the product binary alone")
	var user string
	for _, line := range runtime {
		if strings.HasPrefix(strings.ToUpper(line), "USER ") {
			user = strings.TrimSpace(line[len("USER "):])
		}
	}
	require.NotEmpty(t, user, "the runtime stage must set a USER")
	name, _, _ := strings.Cut(user, ":")
	require.NotContains(t, []string{"root", "0"}, name, "the runtime stage must not run as root")
	require.Contains(t, runtime, `ENTRYPOINT ["jobbill"]`, "the services' commands are jobbill subcommands")
}
