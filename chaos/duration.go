package chaos

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Day is the `d` unit of ParseDuration and FormatDuration: exactly 24 hours of virtual time (no
// calendar, no daylight saving).
const Day = 24 * time.Hour

// durationUnits maps every unit ParseDuration accepts to its length in nanoseconds.
var durationUnits = map[string]uint64{
	"ns": uint64(time.Nanosecond),
	"us": uint64(time.Microsecond),
	"µs": uint64(time.Microsecond), // U+00B5 MICRO SIGN, what time.Duration.String prints
	"μs": uint64(time.Microsecond), // U+03BC GREEK SMALL LETTER MU
	"ms": uint64(time.Millisecond),
	"s":  uint64(time.Second),
	"m":  uint64(time.Minute),
	"h":  uint64(time.Hour),
	"d":  uint64(Day),
}

const unitList = "ns, us, ms, s, m, h or d"

// ParseDuration parses a non-negative duration: Go's time.ParseDuration syntax plus a `d` unit of
// 24 hours, for example "4d", "1d12h", "36h", "90s", "1.5d", "250ms" or "0". Signs are refused
// (a fault never acts in the past), and so is any space. Units may repeat and come in any order,
// as in Go ("1h1h" is 2h); FormatDuration prints the canonical form.
func ParseDuration(s string) (time.Duration, error) {
	d, off, msg := parseDuration(s)
	if msg != "" {
		return 0, &DurationError{Input: s, Offset: off, Msg: msg}
	}
	return d, nil
}

// DurationError is the error ParseDuration returns: what is wrong with which input, and where.
type DurationError struct {
	Input  string // the text given to ParseDuration
	Offset int    // byte offset into Input of the first offending character
	Msg    string // what is wrong, without the input
}

// Error implements error: `invalid duration "1x": unknown unit "x" (want ns, us, ms, s, m, h or d)`.
func (e *DurationError) Error() string {
	return fmt.Sprintf("invalid duration %q: %s", e.Input, e.Msg)
}

// parseDuration is ParseDuration returning the byte offset of the problem and a message ("" on
// success), so ParseSpec can point at a column inside the spec. It follows the algorithm of the
// standard library's time.ParseDuration (accumulating in uint64 nanoseconds, so every value
// Go's parser accepts parses to the same nanosecond) with the `d` unit added and signs refused.
func parseDuration(s string) (time.Duration, int, string) {
	if s == "" {
		return 0, 0, "empty duration (want for example 90s, 36h or 1d12h)"
	}
	switch s[0] {
	case '-':
		return 0, 0, "negative durations are not allowed"
	case '+':
		return 0, 0, "unexpected '+' (durations are written without a sign)"
	}
	if s == "0" {
		return 0, 0, ""
	}
	var total uint64
	i := 0
	for i < len(s) {
		start := i
		c := s[i]
		if c != '.' && (c < '0' || c > '9') {
			return 0, i, fmt.Sprintf("unexpected %s (want a number, e.g. 90s or 1d12h)", describeByte(s, i))
		}
		// Integer part.
		var v uint64
		overflow := false
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			if v > (1<<63-1)/10 {
				overflow = true
			}
			v = v*10 + uint64(s[i]-'0')
			if v > 1<<63 {
				overflow = true
			}
			i++
		}
		if overflow {
			return 0, start, "duration too large (the maximum is about 106751d)"
		}
		pre := i > start
		// Fraction part: digits beyond what fits in f are ignored, as in Go.
		var f uint64
		scale := 1.0
		post := false
		if i < len(s) && s[i] == '.' {
			i++
			fracStart := i
			fracOverflow := false
			for i < len(s) && s[i] >= '0' && s[i] <= '9' {
				if !fracOverflow {
					if f > (1<<63-1)/10 {
						fracOverflow = true
					} else {
						y := f*10 + uint64(s[i]-'0')
						if y > 1<<63 {
							fracOverflow = true
						} else {
							f = y
							scale *= 10
						}
					}
				}
				i++
			}
			post = i > fracStart
		}
		if !pre && !post {
			return 0, start, "a number needs at least one digit"
		}
		// Unit: everything up to the next digit or '.'.
		unitStart := i
		for i < len(s) && s[i] != '.' && (s[i] < '0' || s[i] > '9') {
			i++
		}
		if i == unitStart {
			return 0, unitStart, fmt.Sprintf("missing unit after %q (want %s)", s[start:i], unitList)
		}
		u := s[unitStart:i]
		unit, ok := durationUnits[u]
		if !ok {
			return 0, unitStart, fmt.Sprintf("unknown unit %q (want %s)", u, unitList)
		}
		if v > 1<<63/unit {
			return 0, start, "duration too large (the maximum is about 106751d)"
		}
		v *= unit
		if f > 0 {
			// float64 is exact enough: f*unit/scale <= 8.64e13 ns (a day) < 2^53.
			v += uint64(float64(f) * (float64(unit) / scale))
			if v > 1<<63 {
				return 0, start, "duration too large (the maximum is about 106751d)"
			}
		}
		total += v
		if total > 1<<63-1 {
			return 0, start, "duration too large (the maximum is about 106751d)"
		}
	}
	return time.Duration(total), 0, ""
}

// describeByte names the character at s[i] for an error message.
func describeByte(s string, i int) string {
	r := []rune(s[i:])[0]
	if r == ' ' {
		return "space"
	}
	return strconv.QuoteRune(r)
}

// FormatDuration prints d canonically, so that ParseDuration(FormatDuration(d)) == d for every
// d >= 0. It uses the largest whole units first — days, hours, minutes — and prints the remaining
// part under a minute as time.Duration.String does: 36h is "1d12h", 48h is "2d", 90s is "1m30s",
// 90.5s is "1m30.5s", 1h+250ms is "1h250ms", 0 is "0s". Zero components are left out. A negative
// d prints with a leading '-' (which ParseDuration refuses).
func FormatDuration(d time.Duration) string {
	if d == 0 {
		return "0s"
	}
	var b strings.Builder
	u := uint64(d)
	if d < 0 {
		b.WriteByte('-')
		u = -u // two's complement: correct even for math.MinInt64
	}
	for _, c := range [...]struct {
		unit uint64
		name string
	}{{uint64(Day), "d"}, {uint64(time.Hour), "h"}, {uint64(time.Minute), "m"}} {
		if n := u / c.unit; n > 0 {
			b.WriteString(strconv.FormatUint(n, 10))
			b.WriteString(c.name)
			u -= n * c.unit
		}
	}
	if u > 0 {
		// u < 1m, so it fits an int64 and String prints seconds or a smaller unit.
		b.WriteString(time.Duration(u).String())
	}
	return b.String()
}
