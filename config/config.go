// Package config is everything a jobbill process reads from its configuration, declared once: each
// key is a field of [Config] with its mapstructure tag, and its default is that field in [Default].
// The environment variables, viper's defaults and the documented table ([Settings]) are all
// derived from those two, so that a key cannot be added to one and forgotten in another.
//
// Sources, strongest first: flags (bound by the commands), JOBBILL_* environment variables, a YAML
// file given with --config (keys as below, nested), then the defaults.
package config

import (
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	"github.com/go-viper/mapstructure/v2"
	"github.com/spf13/viper"

	"github.com/jobbill/jobbill/workflows"
)

// Config is everything a jobbill process reads from its configuration. Every key is listed by
// [Settings] with its environment variable and its default.
type Config struct {
	// DatabaseURL is the ledger's Postgres URL as the application role, which may read the
	// tables and call the ledger's functions but write no table directly nor change the schema
	// (ledgerdb/migrations/001_baseline.sql and ledgerdb/code/security.sql).
	DatabaseURL string `mapstructure:"database_url"`
	// MigrateDatabaseURL is the same ledger as the schema's owner: only `jobbill migrate` and
	// `jobbill-dev run` (which migrates first) connect with it, so the long-running services never
	// hold credentials that could alter the schema.
	MigrateDatabaseURL string `mapstructure:"migrate_database_url"`
	// Temporal says where the Temporal server is and which task queue to serve.
	Temporal Temporal `mapstructure:"temporal"`
	// Log sets the worker's logging.
	Log Log `mapstructure:"log"`
	// Policy is how each job's work is retried and how long a late result is awaited; it travels
	// with each job the process submits.
	Policy workflows.Policy `mapstructure:"policy"`
	// Runner says which GPU runner does the work.
	Runner Runner `mapstructure:"runner"`
	// Reconcile says how often the reconcile pass runs and how long it leaves a placeholder alone.
	Reconcile Reconcile `mapstructure:"reconcile"`
	// Expiry says how often the expiry pass runs.
	Expiry Expiry `mapstructure:"expiry"`
	// Metrics says where the worker serves its Prometheus page.
	Metrics Metrics `mapstructure:"metrics"`
	// API configures the HTTP API that `jobbill api` serves.
	API API `mapstructure:"api"`
	// Webhooks configures the delivery of signed webhooks (package webhooks): the worker
	// delivers, and the API checks receiver URLs by the same address rules.
	Webhooks Webhooks `mapstructure:"webhooks"`
}

// Webhooks configures the webhook delivery worker, which `jobbill worker` runs beside the Temporal
// worker (docs/design.md, "Webhooks"; docs/operations.md, "Webhooks").
type Webhooks struct {
	// Enabled runs the delivery worker in `jobbill worker`, which derives the events from the
	// ledger's rows and delivers them; with it off the rows wait until a worker with it on runs.
	Enabled bool `mapstructure:"enabled"`
	// PollInterval is how often an idle worker derives new events and looks for due deliveries.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// Timeout bounds one attempt: connecting, sending and reading the receiver's answer.
	Timeout time.Duration `mapstructure:"timeout"`
	// MaxAge is how long a delivery is retried, from when it could first be sent (queued or
	// replayed, or for a job's later event, the earlier one delivered or given up), before it is
	// marked failed.
	MaxAge time.Duration `mapstructure:"max_age"`
	// InitialBackoff is the wait before the second attempt; each later wait doubles, up to
	// MaxBackoff, with jitter.
	InitialBackoff time.Duration `mapstructure:"initial_backoff"`
	// MaxBackoff caps the wait between two attempts.
	MaxBackoff time.Duration `mapstructure:"max_backoff"`
	// BatchSize is how many deliveries one worker claims, and sends at once, per round.
	BatchSize int `mapstructure:"batch_size"`
	// AllowPrivateURLs lets receivers sit on loopback, private, link-local or otherwise internal
	// addresses, and use plain http. Off, a customer's URL must be https on a public address, so
	// that it cannot reach jobbill's own network (SSRF). For development and tests only.
	AllowPrivateURLs bool `mapstructure:"allow_private_urls"`
}

// API configures the HTTP API: where it listens, how much it reads and how long it waits,
// and which bearer keys it accepts.
type API struct {
	// Listen is the host:port the API listens on.
	Listen string `mapstructure:"listen"`
	// MetricsListen is the host:port of the API's operator listener, which serves GET /metrics
	// (the Prometheus page: the API's HTTP metrics, the ledger's and the Temporal SDK's); empty
	// serves none. The public port never serves /metrics.
	MetricsListen string `mapstructure:"metrics_listen"`
	// MaxBodyBytes is the largest request body accepted; a larger one is refused with 413 and
	// nothing written.
	MaxBodyBytes int64 `mapstructure:"max_body_bytes"`
	// ReadHeaderTimeout bounds reading a request's headers (slow-loris protection).
	ReadHeaderTimeout time.Duration `mapstructure:"read_header_timeout"`
	// ReadTimeout bounds reading a whole request.
	ReadTimeout time.Duration `mapstructure:"read_timeout"`
	// RequestTimeout bounds each handler's work, in particular how long POST /v1/jobs waits for
	// the charge decision before answering 202 (the job is received; poll it).
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
	// WriteTimeout bounds writing a response; it must exceed RequestTimeout, or a slow charge
	// decision would be cut off before its answer is written.
	WriteTimeout time.Duration `mapstructure:"write_timeout"`
	// IdleTimeout bounds how long a keep-alive connection waits for its next request.
	IdleTimeout time.Duration `mapstructure:"idle_timeout"`
	// ShutdownTimeout is how long in-flight requests get to finish once the API is told to stop.
	ShutdownTimeout time.Duration `mapstructure:"shutdown_timeout"`
	// RateLimit is the per-key rate limit. The console counts the requests without a session by
	// address at this rate too.
	RateLimit RateLimit `mapstructure:"rate_limit"`
	// ConsoleRateLimit is the rate limit of each signed-in console session, which counts a page
	// view once (package console); the API's limit does not count the console's pages.
	ConsoleRateLimit RateLimit `mapstructure:"console_rate_limit"`
	// Keys are the bootstrap admin keys: bearer keys the API accepts as admin keys besides the
	// keys kept in the ledger's database (package apikeys), so that a fresh deployment has a way
	// in to create those. In a YAML file, a list of {key, admin: true}; in JOBBILL_API_KEYS,
	// "key1=admin;key2=admin" (see [ParseAPIKeys]). A key for accounts is refused: account,
	// read-only and runner keys are created with `jobbill key create` or POST /v1/keys, and can be
	// revoked without a restart. Keys are secrets: they are never logged or printed.
	Keys []APIKey `mapstructure:"keys"`
}

// RateLimit is a token bucket per bearer credential — a hash of the key a request presents, known or
// not — and, for requests without one, per remote address. A request that finds its bucket empty
// is answered 429 with Retry-After, and nothing is done. The health checks are never limited.
type RateLimit struct {
	// PerSecond is how many requests a second a bucket allows on average; 0 turns the limit off
	// (for an API behind a gateway that limits already).
	PerSecond float64 `mapstructure:"per_second"`
	// Burst is how many requests a bucket allows at once, after an idle spell.
	Burst int `mapstructure:"burst"`
}

// APIKey is one bootstrap admin key of the configuration.
type APIKey struct {
	// Key is the secret the caller sends as "Authorization: Bearer <key>".
	Key string `mapstructure:"key"`
	// Accounts is read only to be refused: keys for accounts live in the ledger's database now,
	// and a configuration that still gives one must fail loudly rather than turn it into an
	// admin key or drop it unnoticed.
	Accounts []string `mapstructure:"accounts"`
	// Admin must be true: the configuration holds admin keys only.
	Admin bool `mapstructure:"admin"`
}

// String hides the secret, so a key printed by mistake (%v of a Config) does not leak.
func (k APIKey) String() string {
	return fmt.Sprintf("{key:*** accounts:%v admin:%v}", k.Accounts, k.Admin)
}

// GoString hides the secret from %#v too.
func (k APIKey) GoString() string { return k.String() }

// MinAPIKeyLength is the shortest key accepted: shorter keys can be guessed.
const MinAPIKeyLength = 16

// ParseAPIKeys reads the one-variable form of api.keys: entries separated by ";", each
// "key=admin" ("key1=admin;key2=admin"). An entry that names accounts instead ("key=acct-a")
// parses, so that [Config.Validate] can refuse it with a clear message. Errors name the entry by
// position, never by its key.
func ParseAPIKeys(s string) ([]APIKey, error) {
	var keys []APIKey
	for i, entry := range strings.Split(s, ";") {
		entry = strings.TrimSpace(entry)
		if entry == "" {
			continue
		}
		key, scope, ok := strings.Cut(entry, "=")
		if !ok || strings.TrimSpace(key) == "" || strings.TrimSpace(scope) == "" {
			return nil, fmt.Errorf("api.keys entry %d: want key=admin or key=account[,account...]", i+1)
		}
		k := APIKey{Key: strings.TrimSpace(key)}
		for _, a := range strings.Split(scope, ",") {
			switch a = strings.TrimSpace(a); a {
			case "":
			case "admin":
				k.Admin = true
			default:
				k.Accounts = append(k.Accounts, a)
			}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// apiKeysHook lets api.keys come from one string (an environment variable or a flag) as well as
// from a YAML list, which viper hands over as []any of maps.
func apiKeysHook(from, to reflect.Type, data any) (any, error) {
	if from.Kind() != reflect.String || to != reflect.TypeOf([]APIKey(nil)) {
		return data, nil
	}
	return ParseAPIKeys(data.(string))
}

// Temporal locates the Temporal server.
type Temporal struct {
	// Address is the frontend's host:port.
	Address string `mapstructure:"address"`
	// Namespace holds jobbill's workflows.
	Namespace string `mapstructure:"namespace"`
	// TaskQueue is the queue the worker polls and the job service starts jobs on.
	TaskQueue string `mapstructure:"task_queue"`
	// UIURL is the Web UI's base URL, for the links the CLI prints.
	UIURL string `mapstructure:"ui_url"`
	// WorkflowCacheSize is how many workflows a worker process keeps in memory between their
	// tasks (the SDK's sticky cache). A refunded job listening for its late result is an open
	// workflow for a day; at the SDK's default of 10,000 a worker holding 10,000 of them used
	// 595 MiB (BENCHMARKS.md#many-waiting-jobs). One evicted replays its short history on
	// its next task instead.
	WorkflowCacheSize int `mapstructure:"workflow_cache_size"`
}

// Log sets the zap logger.
type Log struct {
	// Level is debug, info, warn or error.
	Level string `mapstructure:"level"`
	// Format is console (for people) or json (for log shippers).
	Format string `mapstructure:"format"`
	// Output is where logs go: stderr, stdout or a file path.
	Output string `mapstructure:"output"`
}

// Reconcile is the reconcile pass's schedule, which every worker creates or updates at start.
type Reconcile struct {
	// Interval is how often the pass runs: a job left charged by a run that ended unsettled, a
	// result recorded while Temporal was unreachable, or an orphaned placeholder is healed within
	// about one interval (a placeholder after its grace).
	Interval time.Duration `mapstructure:"interval"`
	// Grace is how old a placeholder must be before the pass resumes it: younger ones may still be
	// starting their workflow.
	Grace time.Duration `mapstructure:"grace"`
	// ResultGrace is how old a recorded, unapplied result must be before the pass applies it:
	// younger ones are probably being signalled by their reporter right now.
	ResultGrace time.Duration `mapstructure:"result_grace"`
}

// Expiry is the expiry pass's schedule, which every worker creates or updates at start beside the
// reconcile pass's.
type Expiry struct {
	// Interval is how often the pass runs: what remains of a credit block is removed within about
	// one interval after the block expires (until then it stays in the balance, but no charge can
	// spend it).
	Interval time.Duration `mapstructure:"interval"`
}

// Metrics says where /metrics is served.
type Metrics struct {
	// Listen is the worker's host:port for GET /metrics; empty serves none. (`jobbill api`
	// serves its own on api.metrics_listen.)
	Listen string `mapstructure:"listen"`
}

// Runner selects and configures the GPU runner.
type Runner struct {
	// Kind is simulated (the built-in stand-in for a GPU service) or http (a GPU service that
	// speaks activities.HTTPRunner's contract).
	Kind string `mapstructure:"kind"`
	// Simulated configures the simulated runner.
	Simulated SimulatedRunner `mapstructure:"simulated"`
	// HTTP configures the HTTP runner.
	HTTP HTTPRunner `mapstructure:"http"`
}

// HTTPRunner configures [activities.HTTPRunner].
type HTTPRunner struct {
	// URL is the GPU service's base URL.
	URL string `mapstructure:"url"`
	// PollInterval is how often a running run is polled.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// RequestTimeout bounds each request to the service.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
}

// SimulatedRunner configures [activities.SimulatedRunner].
type SimulatedRunner struct {
	// Duration is how long an attempt works.
	Duration time.Duration `mapstructure:"duration"`
	// FailureRate is the chance, 0 to 1, that an attempt fails.
	FailureRate float64 `mapstructure:"failure_rate"`
	// Seed makes the failures repeatable.
	Seed uint64 `mapstructure:"seed"`
	// LateBy is how long after its attempt's deadline a "sim:late:N" job's result lands.
	LateBy time.Duration `mapstructure:"late_by"`
	// ReleaseDir is the directory that releases "sim:hold" jobs: their attempts work until a
	// file named after the job's ID exists in it. Empty (the default) refuses such jobs. Tests
	// set it to end work when they choose, so that a loaded machine cannot change how it ends.
	ReleaseDir string `mapstructure:"release_dir"`
}

// Default is the configuration of a local machine set up by the project's scripts.
func Default() Config {
	return Config{
		DatabaseURL:        "postgres://jobbill_app:jobbill_app@127.0.0.1:5432/jobbill?sslmode=disable",
		MigrateDatabaseURL: "postgres://jobbill:jobbill@127.0.0.1:5432/jobbill?sslmode=disable",
		Temporal: Temporal{
			Address:   "127.0.0.1:7233",
			Namespace: workflows.DefaultNamespace,
			TaskQueue: workflows.TaskQueue,
			UIURL:     "http://127.0.0.1:8233",
			// Far above the jobs a worker runs at once, far below the jobs it holds waiting.
			WorkflowCacheSize: 2000,
		},
		Log:    Log{Level: "info", Format: "console", Output: "stderr"},
		Policy: workflows.DefaultPolicy(),
		Runner: Runner{
			Kind:      "simulated",
			Simulated: SimulatedRunner{Duration: 2 * time.Second, FailureRate: 0, Seed: 1, LateBy: 2 * time.Second},
			HTTP:      HTTPRunner{URL: "", PollInterval: 2 * time.Second, RequestTimeout: 10 * time.Second},
		},
		Reconcile: Reconcile{Interval: time.Minute, Grace: 2 * time.Minute, ResultGrace: 30 * time.Second},
		Expiry:    Expiry{Interval: time.Minute},
		Metrics:   Metrics{Listen: "127.0.0.1:9090"},
		API: API{
			Listen:            "127.0.0.1:8080",
			MetricsListen:     "127.0.0.1:9091",
			MaxBodyBytes:      64 << 10,
			ReadHeaderTimeout: 5 * time.Second,
			ReadTimeout:       15 * time.Second,
			RequestTimeout:    30 * time.Second,
			WriteTimeout:      45 * time.Second,
			IdleTimeout:       2 * time.Minute,
			ShutdownTimeout:   40 * time.Second,
			RateLimit:         RateLimit{PerSecond: 20, Burst: 40},
			// A person reads a page before the next: a burst for a few tabs opened at once, then
			// one page every half second.
			ConsoleRateLimit: RateLimit{PerSecond: 2, Burst: 30},
		},
		Webhooks: Webhooks{
			Enabled:        true,
			PollInterval:   time.Second,
			Timeout:        10 * time.Second,
			MaxAge:         72 * time.Hour,
			InitialBackoff: 5 * time.Second,
			MaxBackoff:     time.Hour,
			BatchSize:      20,
		},
	}
}

// Setting is one configuration key.
type Setting struct {
	// Key is the key in a config file, dotted for nesting (temporal.address).
	Key string
	// Env is the environment variable that sets it.
	Env string
	// Default is the default value, as text.
	Default string
}

// Settings lists every configuration key with its environment variable and default, in the order
// of [Config]'s fields: the keys are the fields' mapstructure tags, joined by dots for nesting.
func Settings() []Setting {
	var out []Setting
	leaves(reflect.ValueOf(Default()), "", func(key string, v reflect.Value) {
		def := fmt.Sprint(v.Interface())
		if v.Kind() == reflect.Slice {
			def = "" // no keys by default; a list is not shown as "[]"
		}
		out = append(out, Setting{Key: key, Env: EnvName(key), Default: def})
	})
	return out
}

// leaves calls visit with the dotted key and value of every leaf field of v, a struct.
func leaves(v reflect.Value, prefix string, visit func(key string, v reflect.Value)) {
	for i := range v.NumField() {
		tag := v.Type().Field(i).Tag.Get("mapstructure")
		if tag == "" || tag == "-" {
			continue
		}
		key := prefix + tag
		if f := v.Field(i); f.Kind() == reflect.Struct {
			leaves(f, key+".", visit)
		} else {
			visit(key, f)
		}
	}
}

// EnvName is the environment variable of a configuration key: JOBBILL_ and the key in capitals,
// dots as underscores (temporal.address is JOBBILL_TEMPORAL_ADDRESS).
func EnvName(key string) string {
	return "JOBBILL_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// setDefaults registers every key of c with viper, so that AutomaticEnv finds its variable even
// when no file mentions the key. A list defaults to an empty string rather than an empty list,
// so that its variable, a string, replaces it through the decode hooks (apiKeysHook).
func setDefaults(v *viper.Viper, c Config) {
	leaves(reflect.ValueOf(c), "", func(key string, f reflect.Value) {
		if f.Kind() == reflect.Slice {
			v.SetDefault(key, "")
			return
		}
		v.SetDefault(key, f.Interface())
	})
}

// NewViper is a viper that reads JOBBILL_* variables over the defaults of [Default];
// callers bind flags and a config file to it, then [Load].
func NewViper() *viper.Viper {
	v := viper.New()
	setDefaults(v, Default())
	v.SetEnvPrefix("JOBBILL")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	return v
}

// Load decodes v into a Config and checks it.
func Load(v *viper.Viper) (Config, error) {
	var c Config
	// viper's own hooks (durations, comma lists) are kept; apiKeysHook runs first so that a
	// JOBBILL_API_KEYS string is parsed as keys, not split on its commas.
	hook := viper.DecodeHook(mapstructure.ComposeDecodeHookFunc(
		apiKeysHook,
		mapstructure.StringToTimeDurationHookFunc(),
		mapstructure.StringToSliceHookFunc(","),
	))
	if err := v.Unmarshal(&c, hook); err != nil {
		return Config{}, fmt.Errorf("reading configuration: %w", err)
	}
	return c, c.Validate()
}

// Validate refuses a configuration that cannot work, naming the key.
func (c Config) Validate() error {
	var problems []string
	if c.DatabaseURL == "" {
		problems = append(problems, "database_url is empty")
	}
	if c.Temporal.Address == "" || c.Temporal.Namespace == "" || c.Temporal.TaskQueue == "" {
		problems = append(problems, "temporal.address, temporal.namespace and temporal.task_queue must be set")
	}
	if c.Temporal.WorkflowCacheSize < 1 {
		problems = append(problems, fmt.Sprintf("temporal.workflow_cache_size %d: must be at least 1", c.Temporal.WorkflowCacheSize))
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		problems = append(problems, fmt.Sprintf("log.level %q: use debug, info, warn or error", c.Log.Level))
	}
	switch c.Log.Format {
	case "console", "json":
	default:
		problems = append(problems, fmt.Sprintf("log.format %q: use console or json", c.Log.Format))
	}
	switch c.Runner.Kind {
	case "simulated":
	case "http":
		if u, err := url.Parse(c.Runner.HTTP.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			problems = append(problems, fmt.Sprintf("runner.http.url %q: an http(s) URL is needed with runner.kind http", c.Runner.HTTP.URL))
		}
	default:
		problems = append(problems, fmt.Sprintf("runner.kind %q: use simulated or http", c.Runner.Kind))
	}
	if r := c.Runner.Simulated.FailureRate; r < 0 || r > 1 {
		problems = append(problems, fmt.Sprintf("runner.simulated.failure_rate %v: must be between 0 and 1", r))
	}
	if err := c.Policy.Validate(); err != nil {
		problems = append(problems, "policy: "+err.Error())
	}
	if c.Reconcile.Interval < time.Second || c.Reconcile.Grace < 0 || c.Reconcile.ResultGrace < 0 {
		problems = append(problems, "reconcile.interval must be at least 1s, and reconcile.grace and reconcile.result_grace must not be negative")
	}
	if c.Expiry.Interval < time.Second {
		problems = append(problems, "expiry.interval must be at least 1s")
	}
	problems = append(problems, c.API.problems()...)
	problems = append(problems, c.Webhooks.problems()...)
	if len(problems) > 0 {
		return fmt.Errorf("invalid configuration: %s", strings.Join(problems, "; "))
	}
	return nil
}

// problems lists what is wrong with the API section. Keys are named by position only: a
// configuration error must not print a secret.
func (a API) problems() []string {
	var problems []string
	if a.MaxBodyBytes <= 0 {
		problems = append(problems, "api.max_body_bytes must be above zero")
	}
	// A slice, not a map: the problems come out in the same order every time.
	for _, timeout := range []struct {
		key string
		d   time.Duration
	}{
		{"api.read_header_timeout", a.ReadHeaderTimeout}, {"api.read_timeout", a.ReadTimeout},
		{"api.request_timeout", a.RequestTimeout}, {"api.write_timeout", a.WriteTimeout},
		{"api.idle_timeout", a.IdleTimeout}, {"api.shutdown_timeout", a.ShutdownTimeout},
	} {
		if timeout.d <= 0 {
			problems = append(problems, timeout.key+" must be above zero")
		}
	}
	switch {
	case a.RateLimit.PerSecond < 0:
		problems = append(problems, "api.rate_limit.per_second must not be negative (0 turns the limit off)")
	case a.RateLimit.PerSecond > 0 && a.RateLimit.Burst < 1:
		problems = append(problems, "api.rate_limit.burst must be at least 1 while api.rate_limit.per_second is set")
	}
	switch {
	case a.ConsoleRateLimit.PerSecond < 0:
		problems = append(problems, "api.console_rate_limit.per_second must not be negative (0 turns the limit off)")
	case a.ConsoleRateLimit.PerSecond > 0 && a.ConsoleRateLimit.Burst < 1:
		problems = append(problems, "api.console_rate_limit.burst must be at least 1 while api.console_rate_limit.per_second is set")
	}
	if a.WriteTimeout > 0 && a.WriteTimeout <= a.RequestTimeout {
		problems = append(problems, "api.write_timeout must exceed api.request_timeout, or a slow charge decision is cut off unanswered")
	}
	seen := map[string]int{}
	for i, k := range a.Keys {
		at := fmt.Sprintf("api.keys[%d]", i)
		switch {
		case len(k.Key) < MinAPIKeyLength:
			problems = append(problems, fmt.Sprintf("%s: the key must be at least %d characters", at, MinAPIKeyLength))
		case strings.ContainsAny(k.Key, " \t\r\n;="):
			problems = append(problems, at+": the key must not contain whitespace, ';' or '='")
		}
		if j, dup := seen[k.Key]; dup {
			problems = append(problems, fmt.Sprintf("%s: the same key as api.keys[%d]", at, j))
		}
		seen[k.Key] = i
		// Refused rather than read as admin: a key an operator meant for one account must never
		// open every account, and dropping it silently would leave its holder locked out
		// without a word.
		if !k.Admin || len(k.Accounts) > 0 {
			problems = append(problems, at+": the configuration holds bootstrap admin keys only (key=admin, or admin: true "+
				"without accounts); create a key for an account with `jobbill key create --scope customer --account ACCOUNT`")
		}
	}
	return problems
}

// problems lists what is wrong with the webhooks section.
func (w Webhooks) problems() []string {
	var problems []string
	for _, d := range []struct {
		key string
		d   time.Duration
	}{
		{"webhooks.poll_interval", w.PollInterval}, {"webhooks.timeout", w.Timeout}, {"webhooks.max_age", w.MaxAge},
		{"webhooks.initial_backoff", w.InitialBackoff}, {"webhooks.max_backoff", w.MaxBackoff},
	} {
		if d.d <= 0 {
			problems = append(problems, d.key+" must be above zero")
		}
	}
	if w.MaxBackoff < w.InitialBackoff {
		problems = append(problems, "webhooks.max_backoff must not be below webhooks.initial_backoff")
	}
	if w.BatchSize < 1 || w.BatchSize > 1000 {
		problems = append(problems, "webhooks.batch_size must be from 1 to 1000")
	}
	return problems
}
