package llm

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"

	"github.com/tmc/langchaingo/llms"
	"github.com/tmc/langchaingo/llms/anthropic"
	"github.com/tmc/langchaingo/llms/ollama"
	"github.com/tmc/langchaingo/llms/openai"
)

// Providers New knows, and the two the harness serves itself.
const (
	ProviderOpenAI    = "openai"    // any OpenAI-compatible endpoint (OpenAI, vLLM, llama.cpp, Ollama's /v1, …)
	ProviderAnthropic = "anthropic" // Anthropic's Messages API
	ProviderOllama    = "ollama"    // Ollama's native /api/chat
	ProviderReplay    = "replay"    // a run's recorded exchanges, served by the harness
)

// Environment variables New reads (from the harness's own environment,
// never the sandbox's).
const (
	EnvOpenAIKey     = "OPENAI_API_KEY"      // required for openai
	EnvOpenAIBaseURL = "OPENAI_BASE_URL"     // optional; default https://api.openai.com/v1
	EnvOpenAIOrg     = "OPENAI_ORGANIZATION" // optional
	EnvAnthropicKey  = "ANTHROPIC_API_KEY"   // required for anthropic
	EnvAnthropicBase = "ANTHROPIC_BASE_URL"  // optional; default https://api.anthropic.com
	EnvOllamaHost    = "OLLAMA_HOST"         // optional; default http://127.0.0.1:11434
)

const (
	defaultOpenAIBase  = "https://api.openai.com/v1"
	defaultAnthropic   = "https://api.anthropic.com"
	defaultOllamaHost  = "http://127.0.0.1:11434"
	defaultOllamaPort  = "11434"
	providersSupported = "openai:MODEL, anthropic:MODEL, ollama:MODEL, scripted or replay:RUN-ID"
)

// Options of New.
type Options struct {
	// Env looks up the harness's environment variables. Default os.Getenv.
	Env func(string) string
	// HTTPClient makes the provider calls (its Transport is wrapped to read
	// each answer's status and Retry-After). Default http.DefaultClient.
	HTTPClient *http.Client
}

// ParseSpec parses a model spec as given to --llm or in a scenario:
// "scripted", "replay:RUN-ID", "openai:MODEL", "anthropic:MODEL" or
// "ollama:MODEL". The model name is everything after the first colon
// ("ollama:llama3:8b" is model "llama3:8b"). Errors wrap ErrConfig.
func ParseSpec(s string) (Spec, error) {
	s = strings.TrimSpace(s)
	provider, model, hasModel := strings.Cut(s, ":")
	switch provider {
	case ProviderScripted:
		if hasModel {
			return Spec{}, fmt.Errorf("%w: model spec %q: the scripted model takes no name; write \"scripted\"", ErrConfig, s)
		}
		return Spec{Provider: provider}, nil
	case ProviderReplay:
		if model == "" {
			return Spec{}, fmt.Errorf("%w: model spec %q: name the run to replay, as replay:RUN-ID", ErrConfig, s)
		}
		return Spec{Provider: provider, Model: model}, nil
	case ProviderOpenAI, ProviderAnthropic, ProviderOllama:
		if model == "" {
			return Spec{}, fmt.Errorf("%w: model spec %q: name the model, as %s:MODEL (e.g. %s)", ErrConfig, s, provider, exampleModel(provider))
		}
		return Spec{Provider: provider, Model: model}, nil
	case "":
		return Spec{}, fmt.Errorf("%w: empty model spec: want one of %s", ErrConfig, providersSupported)
	}
	return Spec{}, fmt.Errorf("%w: model spec %q: unknown provider %q: want one of %s", ErrConfig, s, provider, providersSupported)
}

func exampleModel(provider string) string {
	switch provider {
	case ProviderOpenAI:
		return "openai:gpt-4o-mini"
	case ProviderAnthropic:
		return "anthropic:claude-3-5-haiku-latest"
	}
	return "ollama:llama3"
}

// New builds the Model of a real provider through langchaingo, with keys
// and URLs read from the harness's environment (Options.Env):
//
//   - openai: OPENAI_API_KEY (required), OPENAI_BASE_URL (optional, any
//     OpenAI-compatible server such as vLLM, llama.cpp or Ollama's /v1;
//     default https://api.openai.com/v1), OPENAI_ORGANIZATION (optional);
//   - anthropic: ANTHROPIC_API_KEY (required), ANTHROPIC_BASE_URL (optional,
//     the server root as in Anthropic's SDKs, e.g. https://api.anthropic.com;
//     /v1 is appended unless the URL already ends with it);
//   - ollama: OLLAMA_HOST (default http://127.0.0.1:11434; "host",
//     "host:port" and URLs are accepted, as by Ollama itself).
//
// The scripted and replay models are built by the harness, not here. Every
// error wraps ErrConfig and names the variable to set.
func New(spec Spec, opts Options) (Model, error) {
	env := opts.Env
	if env == nil {
		env = os.Getenv
	}
	hc := opts.HTTPClient
	if hc == nil {
		hc = http.DefaultClient
	}
	hc = observe(hc)
	switch spec.Provider {
	case ProviderScripted, ProviderReplay:
		return nil, fmt.Errorf("%w: model %s is served by the harness itself (scenario rules or a run's recording), not by llm.New", ErrConfig, spec)
	case ProviderOpenAI, ProviderAnthropic, ProviderOllama:
	default:
		return nil, fmt.Errorf("%w: unknown provider %q in model %s: want one of %s", ErrConfig, spec.Provider, spec, providersSupported)
	}
	if spec.Model == "" {
		return nil, fmt.Errorf("%w: provider %s needs a model name: write %s", ErrConfig, spec.Provider, exampleModel(spec.Provider))
	}
	var (
		m   llms.Model
		err error
	)
	switch spec.Provider {
	case ProviderOpenAI:
		key := strings.TrimSpace(env(EnvOpenAIKey))
		if key == "" {
			return nil, fmt.Errorf("%w: model %s needs %s in the harness's environment (the key of the OpenAI-compatible server; any non-empty value for a local server that checks none)", ErrConfig, spec, EnvOpenAIKey)
		}
		base, berr := httpURL(EnvOpenAIBaseURL, env(EnvOpenAIBaseURL), defaultOpenAIBase)
		if berr != nil {
			return nil, berr
		}
		// Every option is given explicitly, so that langchaingo reads
		// nothing from the process environment behind Options.Env.
		m, err = openai.New(
			openai.WithToken(key),
			openai.WithModel(spec.Model),
			openai.WithBaseURL(base),
			openai.WithOrganization(strings.TrimSpace(env(EnvOpenAIOrg))),
			openai.WithHTTPClient(hc),
		)
	case ProviderAnthropic:
		key := strings.TrimSpace(env(EnvAnthropicKey))
		if key == "" {
			return nil, fmt.Errorf("%w: model %s needs %s in the harness's environment", ErrConfig, spec, EnvAnthropicKey)
		}
		base, berr := httpURL(EnvAnthropicBase, env(EnvAnthropicBase), defaultAnthropic)
		if berr != nil {
			return nil, berr
		}
		if !strings.HasSuffix(base, "/v1") {
			base += "/v1" // langchaingo appends /messages to a base that includes the version
		}
		m, err = anthropic.New(
			anthropic.WithToken(key),
			anthropic.WithModel(spec.Model),
			anthropic.WithBaseURL(base),
			anthropic.WithHTTPClient(hc),
		)
	case ProviderOllama:
		host, herr := ollamaURL(env(EnvOllamaHost))
		if herr != nil {
			return nil, herr
		}
		m, err = ollama.New(
			ollama.WithServerURL(host),
			ollama.WithModel(spec.Model),
			ollama.WithHTTPClient(hc),
		)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: set up model %s: %v", ErrConfig, spec, err)
	}
	l := NewLangchain(spec.Provider, spec.Model, m).(*langchain)
	l.observed = true
	return l, nil
}

// httpURL checks an http(s) URL from the environment, or gives the default.
func httpURL(name, v, def string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return def, nil
	}
	u, err := url.Parse(v)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("%w: %s=%q is not an http(s) URL: set it to e.g. %s, or unset it for the default", ErrConfig, name, v, def)
	}
	return strings.TrimSuffix(v, "/"), nil
}

// ollamaURL reads OLLAMA_HOST as Ollama does: a URL, "host:port" or "host".
func ollamaURL(v string) (string, error) {
	v = strings.TrimSpace(v)
	if v == "" {
		return defaultOllamaHost, nil
	}
	raw := v
	if !strings.Contains(raw, "://") {
		raw = "http://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Hostname() == "" {
		return "", fmt.Errorf("%w: %s=%q is not a host or URL: set it to e.g. %s, or unset it for the default", ErrConfig, EnvOllamaHost, v, defaultOllamaHost)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), defaultOllamaPort)
	}
	return strings.TrimSuffix(u.String(), "/"), nil
}
