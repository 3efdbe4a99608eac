package chaos

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// TriggerType says what makes a fault fire.
type TriggerType string

// The trigger types of the spec syntax.
const (
	// TriggerStep fires once, when the first checkpoint with step >= N is durable.
	TriggerStep TriggerType = "step"
	// TriggerEffect fires once, at the Nth effect of the run (optionally before or after it).
	TriggerEffect TriggerType = "effect"
	// TriggerLLM fires once, at the Nth LLM call of the run.
	TriggerLLM TriggerType = "llm"
	// TriggerTime fires once, when the run's virtual clock reaches At.
	TriggerTime TriggerType = "t"
	// TriggerEvery fires at every multiple of Every of virtual time.
	TriggerEvery TriggerType = "every"
	// TriggerRate fires at random, Rate times per Per of virtual time on average (seeded).
	TriggerRate TriggerType = "rate"
)

// Phase places an effect-triggered fault relative to the effect's execution.
type Phase string

// The phases of an effect trigger.
const (
	// PhaseDefault lets the fault's kind choose where it lands; it prints as nothing.
	PhaseDefault Phase = ""
	// PhaseBefore lands the fault after the intent is journaled and before the world executes it.
	PhaseBefore Phase = "before"
	// PhaseAfter lands the fault after the result is journaled and before the agent gets the reply.
	PhaseAfter Phase = "after"
)

// Trigger is the `@TRIGGER` part of a fault spec. Only the fields of its Type are set; the others
// are zero, so two triggers that print the same are == equal.
type Trigger struct {
	Type  TriggerType
	N     int           // step:N, effect:N, llm:N (N >= 1)
	Phase Phase         // effect:N:before|after
	At    time.Duration // t:DURATION (virtual time since run start, >= 0)
	Every time.Duration // every:DURATION (> 0)
	Rate  float64       // rate:R/DURATION: R events per Per, R > 0 and finite
	Per   time.Duration // rate:R/DURATION: the DURATION (> 0)
}

// Spec is one parsed fault, `KIND[:ARG]@TRIGGER[/DURATION]`. It is comparable with ==.
type Spec struct {
	Kind     string        // [a-z][a-z0-9-]*, e.g. kill, harness-crash, llm-429, api-version
	Arg      string        // optional text after the first ':' of the kind part, e.g. "v2"; no '@', '/' or space
	Trigger  Trigger       // when the fault fires
	Duration time.Duration // optional /DURATION (> 0) the fault lasts before it heals; 0 = none
}

// SpecError is the error ParseSpec and Spec.Validate return.
type SpecError struct {
	Input  string // the text given to ParseSpec, untrimmed
	Offset int    // byte offset into Input where the problem is (len(Input) if something is missing at the end)
	Msg    string // what is wrong, without the input or the position
}

// Column is the 1-based column, counted in characters, of Offset in Input.
func (e *SpecError) Column() int {
	off := min(max(e.Offset, 0), len(e.Input))
	return utf8.RuneCountInString(e.Input[:off]) + 1
}

// Error implements error: `fault "kill@stp:3": at column 6: unknown trigger "stp" (want ...)`.
func (e *SpecError) Error() string {
	return fmt.Sprintf("fault %q: at column %d: %s", e.Input, e.Column(), e.Msg)
}

const (
	specSyntax   = "KIND[:ARG]@TRIGGER[/DURATION], e.g. kill@step:3"
	triggerList  = "step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION"
	kindSyntaxes = "lowercase letters, digits and '-', starting with a letter"
)

// ParseSpec parses a fault spec, `KIND[:ARG]@TRIGGER[/DURATION]`, checking syntax only: which kinds
// exist, and which take an argument, is the registry's business. Whitespace around the text is
// ignored; inside it is an error. Errors are *SpecError, with the offset of the problem.
func ParseSpec(input string) (Spec, error) {
	p := specParser{in: input}
	sp, ok := p.parse()
	if !ok {
		return Spec{}, &SpecError{Input: input, Offset: p.errOff, Msg: p.errMsg}
	}
	return sp, nil
}

// specParser keeps the original input so that every offset it reports is into that input.
type specParser struct {
	in     string
	errOff int
	errMsg string
}

func (p *specParser) fail(off int, format string, args ...any) bool {
	p.errOff, p.errMsg = off, fmt.Sprintf(format, args...)
	return false
}

func (p *specParser) parse() (Spec, bool) {
	var sp Spec
	start := len(p.in) - len(strings.TrimLeftFunc(p.in, unicode.IsSpace))
	end := len(strings.TrimRightFunc(p.in, unicode.IsSpace))
	if start >= end {
		return sp, p.fail(0, "empty fault spec (want %s)", specSyntax)
	}
	s := p.in[start:end]
	// Characters first, so that later messages can assume printable, space-free text.
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			return sp, p.fail(start+i, "invalid UTF-8")
		case unicode.IsSpace(r):
			return sp, p.fail(start+i, "unexpected space (a fault spec has none, e.g. %s)", "kill@step:3")
		case !unicode.IsPrint(r):
			return sp, p.fail(start+i, "unexpected control character %q", r)
		}
	}

	at := strings.IndexByte(s, '@')
	if at < 0 {
		return sp, p.fail(end, "missing '@TRIGGER' (want %s)", specSyntax)
	}
	head := s[:at]
	kind, arg, hasArg := strings.Cut(head, ":")
	if !p.checkKind(kind, start) {
		return sp, false
	}
	if hasArg {
		argOff := start + len(kind) + 1
		if arg == "" {
			return sp, p.fail(argOff, "empty argument after ':' (drop the ':' or give one, e.g. api-version:v2)")
		}
		if i := strings.IndexByte(arg, '/'); i >= 0 {
			return sp, p.fail(argOff+i, "'/' is not allowed in an argument")
		}
	}
	sp.Kind, sp.Arg = kind, arg

	trigOff := start + at + 1
	trig, rest, restOff, ok := p.parseTrigger(s[at+1:], trigOff)
	if !ok {
		return sp, false
	}
	sp.Trigger = trig
	if restOff >= 0 {
		d, off, msg := parseDuration(rest)
		if msg != "" {
			return sp, p.fail(restOff+off, "fault duration: %s", msg)
		}
		if d == 0 {
			return sp, p.fail(restOff, "fault duration must be greater than 0 (drop '/%s' for a fault that does not heal)", rest)
		}
		sp.Duration = d
	}
	return sp, true
}

// checkKind checks kind, which starts at byte off of the input.
func (p *specParser) checkKind(kind string, off int) bool {
	if kind == "" {
		return p.fail(off, "missing fault kind before '@' (want %s)", specSyntax)
	}
	for i, r := range kind {
		ok := r >= 'a' && r <= 'z' || i > 0 && (r >= '0' && r <= '9' || r == '-')
		if !ok {
			return p.fail(off+i, "invalid character %q in fault kind %q (want %s)", r, kind, kindSyntaxes)
		}
	}
	return true
}

// parseTrigger parses s, the text after '@' starting at byte off of the input. It returns the
// trigger and, if a '/DURATION' follows it, that duration's text and offset (restOff < 0 if none).
func (p *specParser) parseTrigger(s string, off int) (t Trigger, rest string, restOff int, ok bool) {
	restOff = -1
	nameEnd := strings.IndexAny(s, ":/")
	if nameEnd < 0 {
		nameEnd = len(s)
	}
	name := s[:nameEnd]
	if name == "" {
		return t, "", -1, p.fail(off, "missing trigger after '@' (want %s)", triggerList)
	}
	typ := TriggerType(name)
	switch typ {
	case TriggerStep, TriggerEffect, TriggerLLM, TriggerTime, TriggerEvery, TriggerRate:
	default:
		return t, "", -1, p.fail(off, "unknown trigger %q (want %s)", name, triggerList)
	}
	if nameEnd == len(s) || s[nameEnd] != ':' {
		return t, "", -1, p.fail(off+nameEnd, "trigger %q needs ':' and a value (want %s)", name, triggerList)
	}
	if nameEnd+1 == len(s) {
		return t, "", -1, p.fail(off+nameEnd+1, "trigger %q needs a value after ':' (want %s)", name, triggerList)
	}
	value := s[nameEnd+1:]
	valOff := off + nameEnd + 1
	t.Type = typ

	// Split off '/DURATION'. A rate trigger has one '/' of its own.
	parts := strings.Split(value, "/")
	ownParts := 1
	if typ == TriggerRate {
		ownParts = 2
		if len(parts) < 2 {
			return t, "", -1, p.fail(valOff+len(value), "rate needs a period: rate:R/DURATION, e.g. rate:2/1d")
		}
	}
	if len(parts) > ownParts+1 {
		extra := valOff + len(strings.Join(parts[:ownParts+1], "/"))
		return t, "", -1, p.fail(extra, "unexpected '/' (a fault has at most one /DURATION)")
	}
	if len(parts) == ownParts+1 {
		own := strings.Join(parts[:ownParts], "/")
		restOff = valOff + len(own) + 1
		rest = parts[ownParts]
		value = own
	}

	switch typ {
	case TriggerStep, TriggerLLM:
		n, ok := p.parseCount(value, valOff, name)
		if !ok {
			return t, "", -1, false
		}
		t.N = n
	case TriggerEffect:
		num, phase, hasPhase := strings.Cut(value, ":")
		n, ok := p.parseCount(num, valOff, name)
		if !ok {
			return t, "", -1, false
		}
		t.N = n
		if hasPhase {
			phaseOff := valOff + len(num) + 1
			switch Phase(phase) {
			case PhaseBefore, PhaseAfter:
				t.Phase = Phase(phase)
			default:
				return t, "", -1, p.fail(phaseOff, "unknown effect phase %q (want before or after, e.g. effect:2:after)", phase)
			}
		}
	case TriggerTime:
		d, eoff, msg := parseDuration(value)
		if msg != "" {
			return t, "", -1, p.fail(valOff+eoff, "trigger time: %s", msg)
		}
		t.At = d
	case TriggerEvery:
		d, eoff, msg := parseDuration(value)
		if msg != "" {
			return t, "", -1, p.fail(valOff+eoff, "trigger period: %s", msg)
		}
		if d == 0 {
			return t, "", -1, p.fail(valOff, "every needs a period greater than 0, e.g. every:1d")
		}
		t.Every = d
	case TriggerRate:
		r, ok := p.parseRate(parts[0], valOff)
		if !ok {
			return t, "", -1, false
		}
		perOff := valOff + len(parts[0]) + 1
		d, eoff, msg := parseDuration(parts[1])
		if msg != "" {
			return t, "", -1, p.fail(perOff+eoff, "rate period: %s", msg)
		}
		if d == 0 {
			return t, "", -1, p.fail(perOff, "rate needs a period greater than 0, e.g. rate:2/1d")
		}
		t.Rate, t.Per = r, d
	}
	return t, rest, restOff, true
}

// parseCount parses the N of step:N, effect:N and llm:N: decimal digits, at least 1.
func (p *specParser) parseCount(s string, off int, trigger string) (int, bool) {
	if s == "" {
		return 0, p.fail(off, "%s needs a number, e.g. %s:3", trigger, trigger)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, p.fail(off+i, "%s needs a whole number, e.g. %s:3; found %q", trigger, trigger, s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil {
		return 0, p.fail(off, "%s number %s is too large", trigger, s)
	}
	if n < 1 {
		return 0, p.fail(off, "%s counts from 1; got %s", trigger, s)
	}
	return n, true
}

// parseRate parses the R of rate:R/DURATION: digits with an optional fraction, greater than 0.
func (p *specParser) parseRate(s string, off int) (float64, bool) {
	if s == "" {
		return 0, p.fail(off, "rate needs a number of events, e.g. rate:2/1d")
	}
	dot := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
		case c == '.' && !dot && i > 0 && i < len(s)-1:
			dot = true
		default:
			return 0, p.fail(off+i, "rate needs a decimal number such as 2 or 0.5; found %q", s)
		}
	}
	r, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsInf(r, 0) {
		return 0, p.fail(off, "rate %s is too large", s)
	}
	if r <= 0 {
		return 0, p.fail(off, "rate must be greater than 0; got %s", s)
	}
	return r, true
}

// String prints the trigger canonically: "step:3", "effect:2", "effect:2:after", "llm:1",
// "t:1d12h", "every:1d", "rate:2/1h". Durations print with FormatDuration, so "t:36h" parses
// and prints as "t:1d12h"; a rate prints as the shortest decimal that parses back to the same
// float64 ("0.5", never "5e-01").
func (t Trigger) String() string {
	switch t.Type {
	case TriggerStep, TriggerLLM:
		return string(t.Type) + ":" + strconv.Itoa(t.N)
	case TriggerEffect:
		s := "effect:" + strconv.Itoa(t.N)
		if t.Phase != PhaseDefault {
			s += ":" + string(t.Phase)
		}
		return s
	case TriggerTime:
		return "t:" + FormatDuration(t.At)
	case TriggerEvery:
		return "every:" + FormatDuration(t.Every)
	case TriggerRate:
		return "rate:" + strconv.FormatFloat(t.Rate, 'f', -1, 64) + "/" + FormatDuration(t.Per)
	}
	return string(t.Type)
}

// String prints the spec canonically, `KIND[:ARG]@TRIGGER[/DURATION]` with the trigger and
// duration as Trigger.String and FormatDuration print them. For every spec ParseSpec returns,
// ParseSpec(s.String()) == s, and String is a fixed point of that round trip; this is the text
// the run report and the journal record.
func (s Spec) String() string {
	var b strings.Builder
	b.WriteString(s.Kind)
	if s.Arg != "" {
		b.WriteByte(':')
		b.WriteString(s.Arg)
	}
	b.WriteByte('@')
	b.WriteString(s.Trigger.String())
	if s.Duration != 0 {
		b.WriteByte('/')
		b.WriteString(FormatDuration(s.Duration))
	}
	return b.String()
}

// Validate reports whether s is a spec that ParseSpec could have returned — useful for specs
// built in code, such as random draws — so that its String round-trips. Fields of another
// trigger type must be zero. The error is a *SpecError on s.String().
func (s Spec) Validate() error {
	text := s.String()
	fail := func(msg string, args ...any) error {
		return &SpecError{Input: text, Offset: 0, Msg: fmt.Sprintf(msg, args...)}
	}
	t := s.Trigger
	if math.IsNaN(t.Rate) || math.IsInf(t.Rate, 0) {
		return fail("rate must be a finite number greater than 0")
	}
	zero := Trigger{Type: t.Type}
	switch t.Type {
	case TriggerStep, TriggerLLM:
		zero.N = t.N
	case TriggerEffect:
		zero.N, zero.Phase = t.N, t.Phase
	case TriggerTime:
		zero.At = t.At
	case TriggerEvery:
		zero.Every = t.Every
	case TriggerRate:
		zero.Rate, zero.Per = t.Rate, t.Per
	default:
		return fail("unknown trigger type %q (want %s)", t.Type, triggerList)
	}
	if t != zero {
		return fail("trigger %q has fields set that belong to another trigger type: %+v", t.Type, t)
	}
	if s.Duration < 0 || t.At < 0 {
		return fail("negative durations are not allowed")
	}
	parsed, err := ParseSpec(text)
	if err != nil {
		return err
	}
	if parsed != s {
		return fail("spec does not survive a round trip through its text (got %+v back)", parsed)
	}
	return nil
}
