package fleet

import (
	"math"
	"slices"
)

// Log levels, lowest first: a service logs the events at its level and
// above; LevelOff logs nothing.
const (
	LevelDebug = "debug"
	LevelInfo  = "info"
	LevelWarn  = "warn"
	LevelError = "error"
	LevelOff   = "off"
)

var levels = []string{LevelDebug, LevelInfo, LevelWarn, LevelError, LevelOff}

// Log formats, with the bytes one event takes in each (BytesPerEvent).
const (
	FormatText = "text"
	FormatJSON = "json"
	FormatECS  = "ecs" // Elastic Common Schema: JSON with every ECS field
)

var formats = []string{FormatText, FormatJSON, FormatECS}

// BytesPerEvent is the size of one log event in each format.
var BytesPerEvent = map[string]float64{FormatText: 200, FormatJSON: 350, FormatECS: 500}

// Prices of the log pipeline: what Measure's cost is made of.
const (
	// IngestPerGB is the price of ingesting (and indexing) a GB, in
	// dollars.
	IngestPerGB = 0.50
	// StoragePerGBDay is the price of keeping a GB for a day, in dollars.
	StoragePerGBDay = 0.0025
)

// Config is a service's log configuration.
type Config struct {
	// Level is the least severity logged: debug, info, warn, error or off.
	Level string `json:"level"`
	// Sampling is the share of events kept, in (0, 1].
	Sampling float64 `json:"sampling"`
	// ExemptErrors keeps every error event whatever the sampling.
	ExemptErrors bool `json:"exempt_errors"`
	// RetentionDays is how long the logs are kept, 1..3650.
	RetentionDays int `json:"retention_days"`
	// Format is the events' encoding: text, json or ecs.
	Format string `json:"format"`
}

// Rates are a service's log events per day at each level, before any
// level or sampling.
type Rates struct {
	Debug int64 `json:"debug"`
	Info  int64 `json:"info"`
	Warn  int64 `json:"warn"`
	Error int64 `json:"error"`
}

// Figures are what a log configuration costs a service and what it still
// shows.
type Figures struct {
	EventsPerDay   int64   `json:"events_day"`    // events logged per day
	VolumePerDayGB float64 `json:"volume_gb_day"` // GB logged per day
	CostPerDay     float64 `json:"cost_day"`      // dollars per day
	// ErrorVisibility is the share of the service's error events still
	// logged, 0..1.
	ErrorVisibility float64 `json:"error_visibility"`
}

// Measure is the deterministic formula of the fleet world:
//
//	kept(l)    = the events of level l if l is at or above c.Level, else 0
//	events     = (kept(debug) + kept(info) + kept(warn)) × sampling
//	           + kept(error) × (1 if exempt_errors else sampling)
//	volume GB  = events × BytesPerEvent[format] / 1e9
//	cost $/day = volume × (IngestPerGB + StoragePerGBDay × retention_days)
//	visibility = 0 if the level is off, else (1 if exempt_errors else sampling)
//
// rounded: events to a whole number, volume to 6 decimals, cost and
// visibility to 4 (computed from the unrounded values).
func Measure(r Rates, c Config) Figures {
	at := slices.Index(levels, c.Level)
	kept := func(l string, n int64) float64 {
		if at < 0 || slices.Index(levels, l) < at {
			return 0
		}
		return float64(n)
	}
	errShare := c.Sampling
	if c.ExemptErrors {
		errShare = 1
	}
	events := (kept(LevelDebug, r.Debug)+kept(LevelInfo, r.Info)+kept(LevelWarn, r.Warn))*c.Sampling +
		kept(LevelError, r.Error)*errShare
	gb := events * BytesPerEvent[c.Format] / 1e9
	cost := gb * (IngestPerGB + StoragePerGBDay*float64(c.RetentionDays))
	vis := errShare
	if c.Level == LevelOff || at < 0 {
		vis = 0
	}
	return Figures{
		EventsPerDay:    int64(math.Round(events)),
		VolumePerDayGB:  round(gb, 6),
		CostPerDay:      round(cost, 4),
		ErrorVisibility: round(vis, 4),
	}
}

func round(x float64, decimals int) float64 {
	p := math.Pow10(decimals)
	return math.Round(x*p) / p
}
