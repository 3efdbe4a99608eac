package journal_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness/journal"
)

// BenchmarkEffectCommits times the commits of one effect on the effect
// path — a durable intent, a pause (the world's call), the world's answer,
// a durable result — in the shapes an effect's records can take, each
// against the others in the same loop: record sizes as small as the
// floor's appends or as large as an HTTP pass-through's (the answer with
// its by-key index, 600 bytes; the result 700), the answer written as a
// Badger write of its own before the result (CommitUnsynced) or in the
// result's transaction (CommitBuffered), with or without the pause. It
// reports, per shape, each commit's sync and the time in both commits
// (the pause left out), p50:
//
//	GOMAXPROCS=1 go test -run '^$' -bench EffectCommits -benchtime 1000x ./harness/journal
func BenchmarkEffectCommits(b *testing.B) {
	j, err := journal.Open(filepath.Join(benchDir(b), "state"), journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	const pause = 600 * time.Microsecond
	shapes := []struct {
		name                   string
		intent, answer, result int // bytes of each value (answer 0: none)
		unsynced               bool
		pause                  time.Duration
	}{
		{"floor", 20, 0, 20, false, 0},
		{"floor-pause", 20, 0, 20, false, pause},
		{"small-answer-in-result", 20, 20, 20, false, pause},
		{"small-answer-unsynced", 20, 20, 20, true, pause},
		{"large-answer-in-result", 450, 600, 700, false, pause},
		{"large-answer-unsynced", 450, 600, 700, true, pause},
	}
	type timing struct{ intentSync, resultSync, commits []time.Duration }
	timings := make([]timing, len(shapes))
	value := func(n int) []byte { return []byte(strings.Repeat("x", n)) }
	commit := func(es ...journal.Entry) (commit, sync time.Duration) {
		s0, start := j.Stats().SyncTime, time.Now()
		if err := j.Commit(ctx, es...); err != nil {
			b.Fatal(err)
		}
		return time.Since(start), j.Stats().SyncTime - s0
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for k, s := range shapes {
			key := func(part string) []byte { return fmt.Appendf(nil, "fx/%s/%d/%s", s.name, i, part) }
			time.Sleep(s.pause) // the agent's request on its way
			c1, s1 := commit(journal.Entry{Key: key("intent"), Value: value(s.intent)})
			time.Sleep(s.pause) // the world's call
			start := time.Now()
			result := []journal.Entry{{Key: key("result"), Value: value(s.result)}}
			if s.answer > 0 {
				answer := []journal.Entry{{Key: key("ledger"), Value: value(s.answer * 2 / 3)}, {Key: key("bykey"), Value: value(s.answer / 3)}}
				if s.unsynced {
					if err := j.CommitUnsynced(ctx, answer...); err != nil {
						b.Fatal(err)
					}
				} else if err := j.CommitBuffered(ctx, answer...); err != nil {
					b.Fatal(err)
				}
			}
			answered := time.Since(start)
			c2, s2 := commit(result...)
			t := &timings[k]
			t.intentSync = append(t.intentSync, s1)
			t.resultSync = append(t.resultSync, s2)
			t.commits = append(t.commits, c1+answered+c2)
		}
	}
	b.StopTimer()
	p50 := func(d []time.Duration) float64 {
		slices.Sort(d)
		return float64(d[len(d)/2].Microseconds()) / 1000
	}
	for k, s := range shapes {
		b.ReportMetric(p50(timings[k].intentSync), s.name+"-intent-sync-ms")
		b.ReportMetric(p50(timings[k].resultSync), s.name+"-result-sync-ms")
		b.ReportMetric(p50(timings[k].commits), s.name+"-commits-ms")
	}
}
