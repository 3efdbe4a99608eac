package chaos_test

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
)

const day = 24 * time.Hour

// validSpec is one input ParseSpec must accept, what it must return, and its canonical text.
type validSpec struct {
	in        string
	want      chaos.Spec
	canonical string
}

var validSpecs = []validSpec{
	{"kill@step:3", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 3}}, "kill@step:3"},
	{"harness-crash@step:3", chaos.Spec{Kind: "harness-crash", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 3}}, "harness-crash@step:3"},
	{"netdrop@t:36h/2h", chaos.Spec{Kind: "netdrop", Trigger: chaos.Trigger{Type: chaos.TriggerTime, At: 36 * time.Hour}, Duration: 2 * time.Hour}, "netdrop@t:1d12h/2h"},
	{"api-version:v2@t:4d", chaos.Spec{Kind: "api-version", Arg: "v2", Trigger: chaos.Trigger{Type: chaos.TriggerTime, At: 4 * day}}, "api-version:v2@t:4d"},
	{"kill@effect:2:after", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerEffect, N: 2, Phase: chaos.PhaseAfter}}, "kill@effect:2:after"},
	{"kill@effect:1:before", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerEffect, N: 1, Phase: chaos.PhaseBefore}}, "kill@effect:1:before"},
	{"kill@effect:2", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerEffect, N: 2}}, "kill@effect:2"},
	{"llm-429@llm:1", chaos.Spec{Kind: "llm-429", Trigger: chaos.Trigger{Type: chaos.TriggerLLM, N: 1}}, "llm-429@llm:1"},
	{"clock-jump:6h@t:2d", chaos.Spec{Kind: "clock-jump", Arg: "6h", Trigger: chaos.Trigger{Type: chaos.TriggerTime, At: 2 * day}}, "clock-jump:6h@t:2d"},
	{"restart@every:1d", chaos.Spec{Kind: "restart", Trigger: chaos.Trigger{Type: chaos.TriggerEvery, Every: day}}, "restart@every:1d"},
	{"restart@every:24h", chaos.Spec{Kind: "restart", Trigger: chaos.Trigger{Type: chaos.TriggerEvery, Every: day}}, "restart@every:1d"},
	{"kill@rate:2/1d", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerRate, Rate: 2, Per: day}}, "kill@rate:2/1d"},
	{"kill@rate:0.50/1h/30m", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerRate, Rate: 0.5, Per: time.Hour}, Duration: 30 * time.Minute}, "kill@rate:0.5/1h/30m"},
	{"  kill@step:3\n", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 3}}, "kill@step:3"},
	{"kill@step:007", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 7}}, "kill@step:7"},
	{"kill@t:0", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerTime}}, "kill@t:0s"},
	{"kill@t:90s", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerTime, At: 90 * time.Second}}, "kill@t:1m30s"},
	{"kill@t:250ms", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerTime, At: 250 * time.Millisecond}}, "kill@t:250ms"},
	{"x@t:1.5d", chaos.Spec{Kind: "x", Trigger: chaos.Trigger{Type: chaos.TriggerTime, At: 36 * time.Hour}}, "x@t:1d12h"},
	{"netdrop@every:12h/90m", chaos.Spec{Kind: "netdrop", Trigger: chaos.Trigger{Type: chaos.TriggerEvery, Every: 12 * time.Hour}, Duration: 90 * time.Minute}, "netdrop@every:12h/1h30m"},
	{"header:X-Api:v2@llm:2", chaos.Spec{Kind: "header", Arg: "X-Api:v2", Trigger: chaos.Trigger{Type: chaos.TriggerLLM, N: 2}}, "header:X-Api:v2@llm:2"},
	{"latency:200ms@llm:2/1h", chaos.Spec{Kind: "latency", Arg: "200ms", Trigger: chaos.Trigger{Type: chaos.TriggerLLM, N: 2}, Duration: time.Hour}, "latency:200ms@llm:2/1h"},
	{"label:café@step:1", chaos.Spec{Kind: "label", Arg: "café", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 1}}, "label:café@step:1"},
	{"k9-x-@step:1", chaos.Spec{Kind: "k9-x-", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 1}}, "k9-x-@step:1"},
}

// invalidSpec is an input ParseSpec must refuse, the 1-based column of the error, and a piece
// of the message.
type invalidSpec struct {
	in     string
	column int
	msg    string
}

var invalidSpecs = []invalidSpec{
	{"", 1, "empty fault spec"},
	{"   ", 1, "empty fault spec"},
	{"kill@stp:3", 6, `unknown trigger "stp"`},
	{" kill@stp:3", 7, `unknown trigger "stp"`},
	{"kill", 5, "missing '@TRIGGER'"},
	{"@step:3", 1, "missing fault kind"},
	{"Kill@step:3", 1, `invalid character 'K' in fault kind "Kill"`},
	{"9kill@step:3", 1, `invalid character '9'`},
	{"kill_9@step:3", 5, `invalid character '_'`},
	{"kill:@step:3", 6, "empty argument"},
	{"kill:a/b@step:3", 7, "'/' is not allowed in an argument"},
	{"kill@", 6, "missing trigger"},
	{"kill@step", 10, `trigger "step" needs ':'`},
	{"kill@step/2h", 10, `trigger "step" needs ':'`},
	{"kill@step:", 11, `trigger "step" needs a value`},
	{"kill@step:0", 11, "counts from 1"},
	{"kill@step:-1", 11, "whole number"},
	{"kill@step:3x", 12, "whole number"},
	{"kill@step:3@x", 12, "whole number"},
	{"kill@step:99999999999999999999", 11, "too large"},
	{"kill@llm:0", 10, "counts from 1"},
	{"kill@effect:2:during", 15, `unknown effect phase "during"`},
	{"kill@effect:2:", 15, `unknown effect phase ""`},
	{"kill@effect::after", 13, "effect needs a number"},
	{"kill@t:-1h", 8, "negative durations"},
	{"kill@t:+1h", 8, "unexpected '+'"},
	{"kill@t:1x", 9, `unknown unit "x"`},
	{"kill@t:1", 9, "missing unit"},
	{"kill@t:1h/0s", 11, "greater than 0"},
	{"kill@t:1h/", 11, "empty duration"},
	{"kill@t:/2h", 8, "empty duration"},
	{"kill@t:1h/2h/3h", 13, "unexpected '/'"},
	{"kill@t:1d999999999d", 10, "too large"},
	{"kill@every:0s", 12, "greater than 0"},
	{"kill@rate:2", 12, "needs a period"},
	{"kill@rate:0/1d", 11, "greater than 0"},
	{"kill@rate:1e3/1d", 12, "decimal number"},
	{"kill@rate:.5/1d", 11, "decimal number"},
	{"kill@rate:5./1d", 12, "decimal number"},
	{"kill@rate:/1d", 11, "needs a number of events"},
	{"kill@rate:2/0s", 13, "greater than 0"},
	{"kill@rate:2/1d/1h/1m", 18, "unexpected '/'"},
	{"kill@rate:" + strings.Repeat("9", 400) + "/1d", 11, "too large"},
	{"kill @step:3", 5, "unexpected space"},
	{"kill@step:3 /2h", 12, "unexpected space"},
	{"kill@t:1h\x00", 10, "control character"},
	{"ki\xffll@step:1", 3, "invalid UTF-8"},
	{"k:é@stp:1", 5, `unknown trigger "stp"`},
	{"kïll@step:1", 2, `invalid character 'ï'`},
}

var _ = Describe("ParseSpec", func() {
	DescribeTable("accepts valid specs and prints them canonically", append([]any{
		func(v validSpec) {
			got, err := chaos.ParseSpec(v.in)
			Expect(err).NotTo(HaveOccurred())
			Expect(got).To(Equal(v.want))
			Expect(got.String()).To(Equal(v.canonical))
			Expect(got.Validate()).To(Succeed())
			again, err := chaos.ParseSpec(got.String())
			Expect(err).NotTo(HaveOccurred())
			Expect(again).To(Equal(got))
		}},
		entries(func(v validSpec) string { return fmt.Sprintf("%q", v.in) }, validSpecs)...)...,
	)

	DescribeTable("refuses invalid specs, pointing at the column", append([]any{
		func(v invalidSpec) {
			_, err := chaos.ParseSpec(v.in)
			Expect(err).To(HaveOccurred())
			var se *chaos.SpecError
			Expect(errors.As(err, &se)).To(BeTrue(), "want a *SpecError, got %T", err)
			Expect(se.Input).To(Equal(v.in))
			Expect(se.Column()).To(Equal(v.column), "error: %v", err)
			Expect(se.Msg).To(ContainSubstring(v.msg))
			Expect(err.Error()).To(HavePrefix(fmt.Sprintf("fault %q: at column %d: ", v.in, v.column)))
		}},
		entries(func(v invalidSpec) string { return fmt.Sprintf("%q", v.in) }, invalidSpecs)...)...,
	)

	It("words the unknown-trigger error exactly", func() {
		_, err := chaos.ParseSpec("kill@stp:3")
		Expect(err).To(MatchError(`fault "kill@stp:3": at column 6: unknown trigger "stp" ` +
			`(want step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION)`))
	})

	It("round-trips generated specs through String, which is a fixed point", func() {
		seed := GinkgoRandomSeed()
		rng := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
		for i := range 5000 {
			sp := randomSpec(rng)
			text := sp.String()
			Expect(sp.Validate()).To(Succeed(), "spec #%d %+v (seed %d)", i, sp, seed)
			got, err := chaos.ParseSpec(text)
			Expect(err).NotTo(HaveOccurred(), "spec #%d %q (seed %d)", i, text, seed)
			Expect(got).To(Equal(sp), "spec #%d %q (seed %d)", i, text, seed)
			Expect(got.String()).To(Equal(text))
		}
	})

	It("parses generated non-canonical spellings to the spec they mean", func() {
		seed := GinkgoRandomSeed()
		rng := rand.New(rand.NewPCG(uint64(seed), 0xa1a5))
		for i := range 5000 {
			want := randomSpec(rng)
			text := respell(rng, want)
			got, err := chaos.ParseSpec(text)
			Expect(err).NotTo(HaveOccurred(), "spelling #%d %q (seed %d)", i, text, seed)
			Expect(got).To(Equal(want), "spelling #%d %q (seed %d)", i, text, seed)
		}
	})
})

var _ = Describe("Spec.Validate", func() {
	DescribeTable("refuses specs ParseSpec could not have returned",
		func(sp chaos.Spec, msg string) {
			err := sp.Validate()
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(msg))
		},
		Entry("zero value", chaos.Spec{}, "unknown trigger type"),
		Entry("bad kind", chaos.Spec{Kind: "Kill", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 1}}, "invalid character"),
		Entry("step 0", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerStep}}, "counts from 1"),
		Entry("stray field", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 1, At: time.Hour}}, "another trigger type"),
		Entry("phase on step", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 1, Phase: chaos.PhaseAfter}}, "another trigger type"),
		Entry("bad phase", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerEffect, N: 1, Phase: "during"}}, "unknown effect phase"),
		Entry("negative duration", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 1}, Duration: -time.Second}, "negative"),
		Entry("NaN rate", chaos.Spec{Kind: "kill", Trigger: chaos.Trigger{Type: chaos.TriggerRate, Rate: math.NaN(), Per: time.Hour}}, "finite"),
		Entry("'@' in arg", chaos.Spec{Kind: "kill", Arg: "a@b", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 1}}, "unknown trigger"),
		Entry("space in arg", chaos.Spec{Kind: "kill", Arg: "a b", Trigger: chaos.Trigger{Type: chaos.TriggerStep, N: 1}}, "unexpected space"),
	)
})

var _ = Describe("ParseDuration", func() {
	DescribeTable("accepts Go durations plus days",
		func(in string, want time.Duration) {
			Expect(chaos.ParseDuration(in)).To(Equal(want))
		},
		Entry(nil, "4d", 4*day),
		Entry(nil, "1d12h", 36*time.Hour),
		Entry(nil, "36h", 36*time.Hour),
		Entry(nil, "90s", 90*time.Second),
		Entry(nil, "1.5d", 36*time.Hour),
		Entry(nil, "0", time.Duration(0)),
		Entry(nil, "0s", time.Duration(0)),
		Entry(nil, "0d", time.Duration(0)),
		Entry(nil, "1h1h", 2*time.Hour),
		Entry(nil, "1m1h", 61*time.Minute),
		Entry(nil, "1us", time.Microsecond),
		Entry(nil, "1µs", time.Microsecond),
		Entry(nil, "1μs", time.Microsecond),
		Entry(nil, ".5h", 30*time.Minute),
		Entry(nil, "1.h", time.Hour),
		Entry(nil, "0.000000001s", time.Nanosecond),
		Entry(nil, "106751d23h47m16.854775807s", time.Duration(math.MaxInt64)),
	)

	DescribeTable("refuses everything else, with the offset of the problem",
		func(in string, offset int, msg string) {
			_, err := chaos.ParseDuration(in)
			Expect(err).To(HaveOccurred())
			var de *chaos.DurationError
			Expect(errors.As(err, &de)).To(BeTrue())
			Expect(de.Offset).To(Equal(offset), "error: %v", err)
			Expect(err.Error()).To(HavePrefix(fmt.Sprintf("invalid duration %q: ", in)))
			Expect(de.Msg).To(ContainSubstring(msg))
		},
		Entry(nil, "", 0, "empty"),
		Entry(nil, "-1h", 0, "negative"),
		Entry(nil, "+1h", 0, "'+'"),
		Entry(nil, "1", 1, "missing unit"),
		Entry(nil, "1h30", 4, "missing unit"),
		Entry(nil, "1x", 1, `unknown unit "x"`),
		Entry(nil, "1d2w", 3, `unknown unit "w"`),
		Entry(nil, "h", 0, "want a number"),
		Entry(nil, ".h", 0, "at least one digit"),
		Entry(nil, "1 h", 1, `unknown unit " h"`),
		Entry(nil, "1e3s", 1, `unknown unit "e"`),
		Entry(nil, "9999999999999999999h", 0, "too large"),
		Entry(nil, "1h99999999999999999999s", 2, "too large"),
		Entry(nil, "106751d23h47m16.854775808s", 13, "too large"),
		Entry(nil, "107000d", 0, "too large"),
	)

	It("agrees with time.ParseDuration on Go's syntax (differential)", func() {
		seed := GinkgoRandomSeed()
		rng := rand.New(rand.NewPCG(uint64(seed), 0xd1ff))
		alphabet := []string{"0", "1", "2", "5", "9", ".", "h", "m", "s", "ms", "us", "µs", "ns", "x", "00", "99999999999"}
		for i := range 20000 {
			var b strings.Builder
			for range 1 + rng.IntN(8) {
				b.WriteString(alphabet[rng.IntN(len(alphabet))])
			}
			in := b.String()
			want, wantErr := time.ParseDuration(in)
			got, err := chaos.ParseDuration(in)
			Expect(err == nil).To(Equal(wantErr == nil), "input #%d %q: go err %v, ours %v (seed %d)", i, in, wantErr, err, seed)
			if err == nil {
				Expect(got).To(Equal(want), "input #%d %q (seed %d)", i, in, seed)
			}
		}
	})
})

var _ = Describe("FormatDuration", func() {
	DescribeTable("uses the largest whole units",
		func(d time.Duration, want string) {
			Expect(chaos.FormatDuration(d)).To(Equal(want))
		},
		Entry(nil, time.Duration(0), "0s"),
		Entry(nil, 36*time.Hour, "1d12h"),
		Entry(nil, 48*time.Hour, "2d"),
		Entry(nil, 90*time.Second, "1m30s"),
		Entry(nil, 1500*time.Millisecond, "1.5s"),
		Entry(nil, 250*time.Millisecond, "250ms"),
		Entry(nil, time.Nanosecond, "1ns"),
		Entry(nil, time.Microsecond, "1µs"),
		Entry(nil, day+time.Hour+time.Minute+1500*time.Millisecond, "1d1h1m1.5s"),
		Entry(nil, time.Hour+250*time.Millisecond, "1h250ms"),
		Entry(nil, 2*day+30*time.Second, "2d30s"),
		Entry(nil, time.Duration(math.MaxInt64), "106751d23h47m16.854775807s"),
		Entry(nil, -90*time.Second, "-1m30s"),
		Entry(nil, time.Duration(math.MinInt64), "-106751d23h47m16.854775808s"),
	)

	It("round-trips through ParseDuration for generated durations", func() {
		seed := GinkgoRandomSeed()
		rng := rand.New(rand.NewPCG(uint64(seed), 0xf0f0))
		for i := range 20000 {
			d := randomDuration(rng, math.MaxInt64)
			text := chaos.FormatDuration(d)
			got, err := chaos.ParseDuration(text)
			Expect(err).NotTo(HaveOccurred(), "duration #%d %d printed %q (seed %d)", i, int64(d), text, seed)
			Expect(got).To(Equal(d), "duration #%d printed %q (seed %d)", i, text, seed)
			Expect(chaos.FormatDuration(got)).To(Equal(text))
		}
	})
})

// entries turns a table of cases into DescribeTable arguments: the entry description function,
// then one entry per case.
func entries[T any](describe func(T) string, cases []T) []any {
	out := make([]any, 0, len(cases)+1)
	out = append(out, describe)
	for _, c := range cases {
		out = append(out, Entry(nil, c))
	}
	return out
}

// randomDuration draws a duration in [0, limit], spread over every scale from nanoseconds to
// the limit, with a bias towards round values.
func randomDuration(rng *rand.Rand, limit time.Duration) time.Duration {
	units := []time.Duration{time.Nanosecond, time.Microsecond, time.Millisecond, time.Second, time.Minute, time.Hour, day}
	var d time.Duration
	switch rng.IntN(4) {
	case 0:
		d = time.Duration(rng.Uint64N(uint64(limit) + 1))
	case 1:
		u := units[rng.IntN(len(units))]
		d = time.Duration(rng.Uint64N(uint64(limit/u)+1)) * u
	default:
		u := units[rng.IntN(len(units))]
		d = time.Duration(rng.IntN(1000)) * u
		if rng.IntN(2) == 0 {
			d += time.Duration(rng.IntN(1000)) * units[rng.IntN(len(units))]
		}
	}
	if d < 0 || d > limit {
		d = limit
	}
	return d
}

// randomSpec draws a valid spec, covering every trigger type, arguments with ':' and non-ASCII
// text, and optional durations.
func randomSpec(rng *rand.Rand) chaos.Spec {
	kinds := []string{"kill", "harness-crash", "llm-429", "api-version", "netdrop", "clock-jump", "a", "x9-", "restart"}
	args := []string{"", "", "v2", "6h", "X-Api:v2", "a:b:c", "café", "50%", "-1", "ünïcode"}
	sp := chaos.Spec{Kind: kinds[rng.IntN(len(kinds))], Arg: args[rng.IntN(len(args))]}
	positive := func() time.Duration {
		return max(randomDuration(rng, 1000*day), time.Nanosecond)
	}
	n := 1 + rng.IntN(100)
	if rng.IntN(10) == 0 {
		n = 1 + rng.IntN(math.MaxInt32)
	}
	switch rng.IntN(6) {
	case 0:
		sp.Trigger = chaos.Trigger{Type: chaos.TriggerStep, N: n}
	case 1:
		phases := []chaos.Phase{chaos.PhaseDefault, chaos.PhaseBefore, chaos.PhaseAfter}
		sp.Trigger = chaos.Trigger{Type: chaos.TriggerEffect, N: n, Phase: phases[rng.IntN(3)]}
	case 2:
		sp.Trigger = chaos.Trigger{Type: chaos.TriggerLLM, N: n}
	case 3:
		sp.Trigger = chaos.Trigger{Type: chaos.TriggerTime, At: randomDuration(rng, 1000*day)}
	case 4:
		sp.Trigger = chaos.Trigger{Type: chaos.TriggerEvery, Every: positive()}
	case 5:
		rates := []float64{1, 2, 0.5, 0.1, 1.0 / 3, 1e-9, 12345.678, 1e15, rng.Float64() + 1e-6, float64(1 + rng.IntN(1000))}
		sp.Trigger = chaos.Trigger{Type: chaos.TriggerRate, Rate: rates[rng.IntN(len(rates))], Per: positive()}
	}
	if rng.IntN(2) == 0 {
		sp.Duration = positive()
	}
	return sp
}

// respell writes sp in a random non-canonical but equivalent way: surrounding whitespace,
// leading zeros, durations in other units or split into parts.
func respell(rng *rand.Rand, sp chaos.Spec) string {
	var b strings.Builder
	b.WriteString([]string{"", " ", "\t", "\n "}[rng.IntN(4)])
	b.WriteString(sp.Kind)
	if sp.Arg != "" {
		b.WriteString(":" + sp.Arg)
	}
	b.WriteString("@" + string(sp.Trigger.Type) + ":")
	num := func(n int) string { return strings.Repeat("0", rng.IntN(3)) + strconv.Itoa(n) }
	t := sp.Trigger
	switch t.Type {
	case chaos.TriggerStep, chaos.TriggerLLM:
		b.WriteString(num(t.N))
	case chaos.TriggerEffect:
		b.WriteString(num(t.N))
		if t.Phase != chaos.PhaseDefault {
			b.WriteString(":" + string(t.Phase))
		}
	case chaos.TriggerTime:
		b.WriteString(respellDuration(rng, t.At))
	case chaos.TriggerEvery:
		b.WriteString(respellDuration(rng, t.Every))
	case chaos.TriggerRate:
		b.WriteString(strconv.FormatFloat(t.Rate, 'f', -1, 64))
		if rng.IntN(2) == 0 && !strings.Contains(strconv.FormatFloat(t.Rate, 'f', -1, 64), ".") {
			b.WriteString(".000")
		}
		b.WriteString("/" + respellDuration(rng, t.Per))
	}
	if sp.Duration != 0 {
		b.WriteString("/" + respellDuration(rng, sp.Duration))
	}
	b.WriteString([]string{"", " ", "\r\n"}[rng.IntN(3)])
	return b.String()
}

// respellDuration writes d as a sum of parts in arbitrary units, in arbitrary order.
func respellDuration(rng *rand.Rand, d time.Duration) string {
	if d == 0 {
		return []string{"0", "0s", "0d", "0ms"}[rng.IntN(4)]
	}
	type unit struct {
		d    time.Duration
		name string
	}
	units := []unit{{day, "d"}, {time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}, {time.Microsecond, "us"}, {time.Nanosecond, "ns"}}
	var parts []string
	rest := d
	for rest > 0 {
		if len(parts) >= 20 {
			parts = append(parts, strconv.FormatInt(int64(rest), 10)+"ns")
			break
		}
		u := units[rng.IntN(len(units))]
		if rest < u.d {
			continue
		}
		n := rest / u.d
		if rng.IntN(2) == 0 {
			n = 1 + time.Duration(rng.Int64N(int64(n)))
		}
		parts = append(parts, strconv.FormatInt(int64(n), 10)+u.name)
		rest -= n * u.d
	}
	rng.Shuffle(len(parts), func(i, j int) { parts[i], parts[j] = parts[j], parts[i] })
	return strings.Join(parts, "")
}

func ExampleParseSpec() {
	sp, err := chaos.ParseSpec("netdrop@t:36h/2h")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(sp.Kind, sp.Trigger.Type, sp.Trigger.At, sp.Duration)
	fmt.Println(sp) // canonical text: days first

	_, err = chaos.ParseSpec("kill@stp:3")
	fmt.Println(err)
	// Output:
	// netdrop t 36h0m0s 2h0m0s
	// netdrop@t:1d12h/2h
	// fault "kill@stp:3": at column 6: unknown trigger "stp" (want step:N, effect:N[:before|after], llm:N, t:DURATION, every:DURATION, rate:R/DURATION)
}

func ExampleFormatDuration() {
	d, _ := chaos.ParseDuration("1.5d")
	fmt.Println(d, chaos.FormatDuration(d))
	fmt.Println(chaos.FormatDuration(90 * time.Second))
	fmt.Println(chaos.FormatDuration(48 * time.Hour))
	// Output:
	// 36h0m0s 1d12h
	// 1m30s
	// 2d
}
