package fleet

import "slices"

// release is one version of a logging library and the defaults it gives
// a service that does not set them.
type release struct {
	Version string
	Level   string // the default level
	Format  string // the default format
}

// libraries are the logging libraries the fleet uses, each with its
// releases in order: a world starts at the first, and a dependency update
// moves a library to the next.
var libraries = map[string][]release{
	// logkit 2.0 logs ECS by default: bigger events, and a candidate
	// written for json stops working.
	"logkit": {{Version: "1.8.2", Level: LevelInfo, Format: FormatJSON}, {Version: "2.0.0", Level: LevelInfo, Format: FormatECS}},
	// zlog 1.0 logs debug by default: many more events.
	"zlog": {{Version: "0.9.4", Level: LevelInfo, Format: FormatJSON}, {Version: "1.0.0", Level: LevelDebug, Format: FormatJSON}},
}

// initialServices is the fleet every world starts with: each service on
// its library's first release's defaults but for the fields it pins.
func initialServices() []*Service {
	type def struct {
		name, lib  string
		rates      Rates
		parsers    []string
		minRet     int
		retention  int
		pinnedLvl  string // "" : the library's default
		sampling   float64
		exemptErrs bool
	}
	defs := []def{
		{name: "api", lib: "logkit", rates: Rates{Debug: 900e6, Info: 600e6, Warn: 30e6, Error: 2e6}, parsers: []string{FormatJSON, FormatECS}, minRet: 7, retention: 30, sampling: 1},
		{name: "checkout", lib: "logkit", rates: Rates{Debug: 200e6, Info: 300e6, Warn: 10e6, Error: 1e6}, parsers: []string{FormatText, FormatJSON, FormatECS}, minRet: 30, retention: 30, sampling: 1},
		{name: "search", lib: "zlog", rates: Rates{Debug: 1200e6, Info: 800e6, Warn: 50e6, Error: 1e6}, parsers: []string{FormatText, FormatJSON}, minRet: 7, retention: 14, pinnedLvl: LevelDebug, sampling: 1},
		{name: "billing", lib: "zlog", rates: Rates{Debug: 50e6, Info: 100e6, Warn: 5e6, Error: 500e3}, parsers: []string{FormatJSON, FormatECS}, minRet: 90, retention: 365, sampling: 1},
		{name: "worker", lib: "zlog", rates: Rates{Debug: 300e6, Info: 200e6, Warn: 20e6, Error: 3e6}, parsers: []string{FormatText, FormatJSON}, minRet: 7, retention: 30, sampling: 1},
	}
	out := make([]*Service, 0, len(defs))
	for _, d := range defs {
		rel := libraries[d.lib][0]
		cfg := Config{Level: rel.Level, Sampling: d.sampling, ExemptErrors: d.exemptErrs, RetentionDays: d.retention, Format: rel.Format}
		pinned := []string{"retention_days", "sampling"}
		if d.pinnedLvl != "" {
			cfg.Level = d.pinnedLvl
			pinned = append(pinned, "level")
		}
		slices.Sort(pinned)
		out = append(out, &Service{Name: d.name, Library: d.lib, Rates: d.rates, Parsers: d.parsers, MinRetentionDays: d.minRet,
			Config: cfg, Staging: cfg, Pinned: pinned})
	}
	return out
}
