package worker

import (
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/viper"

	"github.com/jobbill/jobbill/workflows"
)

// Config is everything a jobbill process reads from its configuration: a YAML file (--config),
// JOBBILL_* environment variables and flags, with the defaults of [DefaultConfig]. Every key is
// listed by [Settings] with its environment variable.
type Config struct {
	// DatabaseURL is the ledger's Postgres URL.
	DatabaseURL string `mapstructure:"database_url"`
	// Temporal says where the Temporal server is and which task queue to serve.
	Temporal TemporalConfig `mapstructure:"temporal"`
	// Log sets the worker's logging.
	Log LogConfig `mapstructure:"log"`
	// Policy is how each job's work is retried and how long a late result is awaited.
	Policy PolicyConfig `mapstructure:"policy"`
	// Runner says which GPU runner does the work.
	Runner RunnerConfig `mapstructure:"runner"`
}

// TemporalConfig locates the Temporal server.
type TemporalConfig struct {
	// Address is the frontend's host:port.
	Address string `mapstructure:"address"`
	// Namespace holds jobbill's workflows.
	Namespace string `mapstructure:"namespace"`
	// TaskQueue is the queue the worker polls and the starter starts jobs on.
	TaskQueue string `mapstructure:"task_queue"`
	// UIURL is the Web UI's base URL, for the links the CLI prints.
	UIURL string `mapstructure:"ui_url"`
}

// LogConfig sets the zap logger.
type LogConfig struct {
	// Level is debug, info, warn or error.
	Level string `mapstructure:"level"`
	// Format is console (for people) or json (for log shippers).
	Format string `mapstructure:"format"`
	// Output is where logs go: stderr, stdout or a file path.
	Output string `mapstructure:"output"`
}

// PolicyConfig is [workflows.Policy] as configuration keys.
type PolicyConfig struct {
	// InitialInterval is the wait before the first retry of the work.
	InitialInterval time.Duration `mapstructure:"initial_interval"`
	// BackoffCoefficient multiplies the wait after each retry.
	BackoffCoefficient float64 `mapstructure:"backoff_coefficient"`
	// MaximumInterval caps the wait between retries.
	MaximumInterval time.Duration `mapstructure:"maximum_interval"`
	// MaximumAttempts is how many attempts the work gets before the job is refunded and dead-lettered.
	MaximumAttempts int32 `mapstructure:"maximum_attempts"`
	// StartToClose is the longest one attempt may run.
	StartToClose time.Duration `mapstructure:"start_to_close"`
	// HeartbeatTimeout is how long an attempt may go silent before it is taken for dead.
	HeartbeatTimeout time.Duration `mapstructure:"heartbeat_timeout"`
	// LateResultWindow is how long a refunded job keeps listening for a late result.
	LateResultWindow time.Duration `mapstructure:"late_result_window"`
}

// WorkflowPolicy converts the keys to the workflow's policy.
func (p PolicyConfig) WorkflowPolicy() workflows.Policy {
	return workflows.Policy{
		InitialInterval:    p.InitialInterval,
		BackoffCoefficient: p.BackoffCoefficient,
		MaximumInterval:    p.MaximumInterval,
		MaximumAttempts:    p.MaximumAttempts,
		StartToClose:       p.StartToClose,
		HeartbeatTimeout:   p.HeartbeatTimeout,
		LateResultWindow:   p.LateResultWindow,
	}.WithDefaults()
}

// RunnerConfig selects and configures the GPU runner.
type RunnerConfig struct {
	// Kind is simulated (the built-in stand-in for a GPU service) or http (a GPU service that
	// speaks activities.HTTPRunner's contract).
	Kind string `mapstructure:"kind"`
	// Simulated configures the simulated runner.
	Simulated SimulatedRunnerConfig `mapstructure:"simulated"`
	// HTTP configures the HTTP runner.
	HTTP HTTPRunnerConfig `mapstructure:"http"`
}

// HTTPRunnerConfig configures [activities.HTTPRunner].
type HTTPRunnerConfig struct {
	// URL is the GPU service's base URL.
	URL string `mapstructure:"url"`
	// PollInterval is how often a running run is polled.
	PollInterval time.Duration `mapstructure:"poll_interval"`
	// RequestTimeout bounds each request to the service.
	RequestTimeout time.Duration `mapstructure:"request_timeout"`
}

// SimulatedRunnerConfig configures [activities.SimulatedRunner].
type SimulatedRunnerConfig struct {
	// Duration is how long an attempt works.
	Duration time.Duration `mapstructure:"duration"`
	// FailureRate is the chance, 0 to 1, that an attempt fails.
	FailureRate float64 `mapstructure:"failure_rate"`
	// Seed makes the failures repeatable.
	Seed uint64 `mapstructure:"seed"`
}

// DefaultConfig is the configuration of a local machine set up by the project's scripts.
func DefaultConfig() Config {
	p := workflows.DefaultPolicy()
	return Config{
		DatabaseURL: "postgres://jobbill:jobbill@127.0.0.1:5432/jobbill?sslmode=disable",
		Temporal: TemporalConfig{
			Address:   "127.0.0.1:7233",
			Namespace: "default",
			TaskQueue: workflows.TaskQueue,
			UIURL:     "http://127.0.0.1:8233",
		},
		Log: LogConfig{Level: "info", Format: "console", Output: "stderr"},
		Policy: PolicyConfig{
			InitialInterval:    p.InitialInterval,
			BackoffCoefficient: p.BackoffCoefficient,
			MaximumInterval:    p.MaximumInterval,
			MaximumAttempts:    p.MaximumAttempts,
			StartToClose:       p.StartToClose,
			HeartbeatTimeout:   p.HeartbeatTimeout,
			LateResultWindow:   p.LateResultWindow,
		},
		Runner: RunnerConfig{
			Kind:      "simulated",
			Simulated: SimulatedRunnerConfig{Duration: 2 * time.Second, FailureRate: 0, Seed: 1},
			HTTP:      HTTPRunnerConfig{URL: "", PollInterval: 2 * time.Second, RequestTimeout: 10 * time.Second},
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

// Settings lists every configuration key with its environment variable and default, in the
// order of [Config]'s fields.
func Settings() []Setting {
	defaults := flatten(DefaultConfig())
	var out []Setting
	for _, key := range settingKeys {
		out = append(out, Setting{Key: key, Env: EnvName(key), Default: fmt.Sprint(defaults[key])})
	}
	return out
}

// settingKeys are Config's keys in field order (mapstructure tags joined by dots).
var settingKeys = []string{
	"database_url",
	"temporal.address", "temporal.namespace", "temporal.task_queue", "temporal.ui_url",
	"log.level", "log.format", "log.output",
	"policy.initial_interval", "policy.backoff_coefficient", "policy.maximum_interval",
	"policy.maximum_attempts", "policy.start_to_close", "policy.heartbeat_timeout", "policy.late_result_window",
	"runner.kind", "runner.simulated.duration", "runner.simulated.failure_rate", "runner.simulated.seed",
	"runner.http.url", "runner.http.poll_interval", "runner.http.request_timeout",
}

// EnvName is the environment variable of a configuration key: JOBBILL_ and the key in capitals,
// dots as underscores (temporal.address is JOBBILL_TEMPORAL_ADDRESS).
func EnvName(key string) string {
	return "JOBBILL_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// flatten is c as viper sees it: each leaf under its dotted key.
func flatten(c Config) map[string]any {
	v := viper.New()
	setDefaults(v, c)
	out := map[string]any{}
	for _, key := range v.AllKeys() {
		out[key] = v.Get(key)
	}
	return out
}

// setDefaults registers every key with viper, so that AutomaticEnv finds its variable even when
// no file mentions the key.
func setDefaults(v *viper.Viper, c Config) {
	v.SetDefault("database_url", c.DatabaseURL)
	v.SetDefault("temporal.address", c.Temporal.Address)
	v.SetDefault("temporal.namespace", c.Temporal.Namespace)
	v.SetDefault("temporal.task_queue", c.Temporal.TaskQueue)
	v.SetDefault("temporal.ui_url", c.Temporal.UIURL)
	v.SetDefault("log.level", c.Log.Level)
	v.SetDefault("log.format", c.Log.Format)
	v.SetDefault("log.output", c.Log.Output)
	v.SetDefault("policy.initial_interval", c.Policy.InitialInterval)
	v.SetDefault("policy.backoff_coefficient", c.Policy.BackoffCoefficient)
	v.SetDefault("policy.maximum_interval", c.Policy.MaximumInterval)
	v.SetDefault("policy.maximum_attempts", c.Policy.MaximumAttempts)
	v.SetDefault("policy.start_to_close", c.Policy.StartToClose)
	v.SetDefault("policy.heartbeat_timeout", c.Policy.HeartbeatTimeout)
	v.SetDefault("policy.late_result_window", c.Policy.LateResultWindow)
	v.SetDefault("runner.kind", c.Runner.Kind)
	v.SetDefault("runner.simulated.duration", c.Runner.Simulated.Duration)
	v.SetDefault("runner.simulated.failure_rate", c.Runner.Simulated.FailureRate)
	v.SetDefault("runner.simulated.seed", c.Runner.Simulated.Seed)
	v.SetDefault("runner.http.url", c.Runner.HTTP.URL)
	v.SetDefault("runner.http.poll_interval", c.Runner.HTTP.PollInterval)
	v.SetDefault("runner.http.request_timeout", c.Runner.HTTP.RequestTimeout)
}

// NewViper is a viper that reads JOBBILL_* variables over the defaults of [DefaultConfig];
// callers bind flags and a config file to it, then [Load].
func NewViper() *viper.Viper {
	v := viper.New()
	setDefaults(v, DefaultConfig())
	v.SetEnvPrefix("JOBBILL")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_", "-", "_"))
	v.AutomaticEnv()
	return v
}

// Load decodes v into a Config and checks it.
func Load(v *viper.Viper) (Config, error) {
	var c Config
	if err := v.Unmarshal(&c); err != nil {
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
	if c.Policy.MaximumAttempts < 0 {
		problems = append(problems, "policy.maximum_attempts must not be negative")
	}
	if len(problems) > 0 {
		return fmt.Errorf("invalid configuration: %s", strings.Join(problems, "; "))
	}
	return nil
}
