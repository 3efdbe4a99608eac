package chaos_test

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/overnight-dev/overnight/chaos"
)

// FuzzParseSpec checks, for any text: ParseSpec does not panic; an error is a *SpecError whose
// offset lies inside the input; and a parsed spec prints to text that parses back to the same
// spec and prints the same again.
func FuzzParseSpec(f *testing.F) {
	for _, v := range validSpecs {
		f.Add(v.in)
	}
	for _, v := range invalidSpecs {
		f.Add(v.in)
	}
	f.Add("kill@rate:1.5/36h/2h")
	f.Add("x:y:z@effect:9:before/1d1ns")
	f.Fuzz(func(t *testing.T, in string) {
		sp, err := chaos.ParseSpec(in)
		if err != nil {
			var se *chaos.SpecError
			if !errors.As(err, &se) {
				t.Fatalf("ParseSpec(%q): error %T is not a *SpecError: %v", in, err, err)
			}
			if se.Input != in || se.Offset < 0 || se.Offset > len(in) || se.Column() < 1 {
				t.Fatalf("ParseSpec(%q): bad error position: %+v", in, se)
			}
			if sp != (chaos.Spec{}) {
				t.Fatalf("ParseSpec(%q): error %v with a non-zero spec %+v", in, err, sp)
			}
			return
		}
		text := sp.String()
		again, err := chaos.ParseSpec(text)
		if err != nil {
			t.Fatalf("ParseSpec(%q) = %+v, whose String %q does not parse: %v", in, sp, text, err)
		}
		if again != sp {
			t.Fatalf("ParseSpec(%q) = %+v, String %q parses to %+v", in, sp, text, again)
		}
		if again.String() != text {
			t.Fatalf("String is not a fixed point: %q then %q", text, again.String())
		}
		if err := sp.Validate(); err != nil {
			t.Fatalf("ParseSpec(%q) = %+v, which does not Validate: %v", in, sp, err)
		}
		if strings.TrimSpace(text) != text || !utf8.ValidString(text) {
			t.Fatalf("canonical text %q has surrounding space or invalid UTF-8", text)
		}
	})
}

// FuzzParseDuration checks, for any text: no panic; an error is a *DurationError with an offset
// inside the input; a parsed duration is >= 0 and FormatDuration prints text that parses back to
// it; and on Go's own syntax (no 'd', no sign) the result agrees with time.ParseDuration.
func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"4d", "1d12h", "36h", "90s", "1.5d", "0", "0s", "250ms", "1µs", "1μs", "1us",
		".5h", "1.h", "106751d23h47m16.854775807s", "106751d23h47m16.854775808s", "", "-1h", "+1h", "1", "1x",
		"1 h", "9999999999999999999h", "1.0000000000000000000000001d", "1h1h1h", "0.000000001s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		d, err := chaos.ParseDuration(in)
		if !strings.ContainsRune(in, 'd') && !strings.HasPrefix(in, "+") && !strings.HasPrefix(in, "-") {
			want, wantErr := time.ParseDuration(in)
			if (err == nil) != (wantErr == nil) || err == nil && d != want {
				t.Fatalf("ParseDuration(%q) = %v, %v; time.ParseDuration = %v, %v", in, d, err, want, wantErr)
			}
		}
		if err != nil {
			var de *chaos.DurationError
			if !errors.As(err, &de) {
				t.Fatalf("ParseDuration(%q): error %T is not a *DurationError: %v", in, err, err)
			}
			if de.Input != in || de.Offset < 0 || de.Offset > len(in) {
				t.Fatalf("ParseDuration(%q): bad error position: %+v", in, de)
			}
			return
		}
		if d < 0 {
			t.Fatalf("ParseDuration(%q) = %v, negative", in, d)
		}
		text := chaos.FormatDuration(d)
		again, err := chaos.ParseDuration(text)
		if err != nil || again != d {
			t.Fatalf("FormatDuration(%v) = %q, which parses to %v, %v", d, text, again, err)
		}
		if chaos.FormatDuration(again) != text {
			t.Fatalf("FormatDuration is not a fixed point for %q", text)
		}
	})
}
