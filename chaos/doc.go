// Package chaos owns overnight's faults: the fault spec syntax, the registry of fault kinds
// (plug-ins behind one small interface), seeded schedules and the fault log.
//
// # Fault specs
//
// A fault is written `KIND[:ARG]@TRIGGER[/DURATION]` — on the command line (`--fault`), in a
// scenario file's `faults:` list, in the run report's `faults[].at` and in the journal:
//
//	kill@step:3              kill the agent once the first checkpoint with step >= 3 is durable
//	harness-crash@step:3     crash the harness itself at the same point
//	kill@effect:2            kill it after the world executed the 2nd effect, before its result is journaled
//	kill@effect:2:after      kill it after the 2nd effect's result is journaled, before the reply
//	llm-429@llm:1            answer the 1st LLM call with a 429
//	api-version:v2@t:4d      switch the world's API to v2 after 4 days of virtual time
//	clock-jump:6h@t:2d       jump the clock by 6h at virtual day 2
//	netdrop@t:36h/2h         drop the gateway path at 36h of virtual time, heal 2h later
//	restart@every:1d         restart the agent every virtual day
//	kill@rate:2/1d           kill it at random, twice per virtual day on average (seeded)
//
// KIND is [a-z][a-z0-9-]*. ARG is everything after the first ':' of the part before '@', up to
// the '@' (it may not contain '/' or spaces); what it means is up to the kind. TRIGGER is one of
// step:N, effect:N[:before|after], llm:N (N >= 1), t:DURATION (>= 0), every:DURATION (> 0) or
// rate:R/DURATION (R a decimal number > 0, DURATION > 0). The optional /DURATION (> 0) is how long
// the fault lasts before it heals. All durations are virtual time, in Go's syntax plus a `d` unit
// of 24 hours, without sign (see ParseDuration).
//
// ParseSpec checks syntax only; which kinds exist and which arguments they take is the
// registry's decision. Whitespace around a spec is ignored, whitespace inside it is an error, and
// errors carry the offset of the problem (SpecError).
//
// # Canonical text
//
// Spec.String prints a spec canonically and ParseSpec(s.String()) == s for every parsed s.
// Durations print with FormatDuration, largest whole units first (days, hours, minutes, then the
// rest under a minute as Go prints it), so `netdrop@t:36h/2h` is recorded as
// `netdrop@t:1d12h/2h` and `restart@every:24h` as `restart@every:1d`. Step numbers lose leading
// zeros and a rate prints as its shortest decimal (`rate:0.50/1d` is `rate:0.5/1d`). Compare
// specs with ==, or by their String, never by the text a user typed.
//
// # Faults, schedules and the link
//
// A fault kind is a plug-in (Kind, registered explicitly in a Registry; Default holds the
// catalog this version ships): its New builds a Fault from a spec, whose one required method is
// Inject; a fault that lasts implements Undoer. Faults act only through the Target the harness
// hands them (Process, Network, World, Clock). Where an effect:N trigger without a phase lands
// is the kind's DefaultPhase, else PhaseMid: after the world executed the effect and before its
// result is journaled.
//
// Expand turns specs into concrete instances (every and rate triggers into t: firings drawn from
// a seeded stream), Draw draws faults for a scenario's draws: block, RandomSchedule draws a whole
// schedule for --chaos random from what a run can reach (of the kinds Reach.Kinds names, when it
// names any), and Shrink delta-debugs a failing schedule. NewStreams gives each component its
// own random stream of the run's seed.
//
// Link is the network faults' target: the gateway's unix socket, as a net.Listener whose
// connections Drop, Blackhole and SetLatency act on for real.
//
// See CREATING_FAULTS.md to add a kind.
//
// # What this package must not do
//
// It does not talk to Docker, the journal or the world directly: faults act through the narrow
// interfaces the harness hands them. It never reads the wall clock to decide when a fault fires,
// and draws randomness only from the seeded streams it is given, so the same seed gives the same
// schedule.
package chaos
