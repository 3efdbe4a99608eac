package journal_test

// Run them all in one go, on the same disk:
//
//	go test -run '^$' -bench . ./harness/journal
//
// They write under b.TempDir() (or $OVERNIGHT_BENCH_DIR) and log whether that
// is on the same filesystem as the working directory.

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/overnight-dev/overnight/harness/journal"
)

const benchDirEnv = "OVERNIGHT_BENCH_DIR"

func benchDir(b *testing.B) string {
	b.Helper()
	dir := b.TempDir()
	if base := os.Getenv(benchDirEnv); base != "" {
		var err error
		if dir, err = os.MkdirTemp(base, "journal-bench-"); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	var here, there unix.Stat_t
	wd, _ := os.Getwd()
	if unix.Stat(wd, &here) == nil && unix.Stat(dir, &there) == nil && here.Dev != there.Dev {
		b.Logf("note: %s is on another filesystem than %s; set %s to compare like with like", dir, wd, benchDirEnv)
	}
	return dir
}

// reportLatencies adds p50-ns and p99-ns.
func reportLatencies(b *testing.B, lat []time.Duration) {
	b.Helper()
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Nanoseconds()), "p99-ns")
}

func record128(i int) []byte {
	return fmt.Appendf(nil, "%0128d", i)[:128]
}

// BenchmarkRawFsync is the floor: append 128 bytes to a file and fsync it.
func BenchmarkRawFsync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(benchDir(b), "raw"), os.O_CREATE|os.O_RDWR|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := f.Write(record128(i)); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkRawFdatasync is the floor for a log whose file size does not
// change (as Badger's memtable log, created at full size): write 128 bytes
// into a file already truncated to 32 MiB and fdatasync it.
func BenchmarkRawFdatasync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(benchDir(b), "raw"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(32 << 20); err != nil {
		b.Fatal(err)
	}
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if _, err := f.WriteAt(record128(i), int64(i%(256<<10))*128); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkAppend is one durable Commit of one ~128-byte entry per op, one writer.
func BenchmarkAppend(b *testing.B) {
	j, err := journal.Open(filepath.Join(benchDir(b), "state"), journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		if err := j.Commit(ctx, journal.Entry{Key: fmt.Appendf(nil, "ev/bench/%012d", i), Value: record128(i)}); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(start))
	}
	b.StopTimer()
	reportLatencies(b, lat)
}

// BenchmarkAppendParallel32 is 32 goroutines (not GOMAXPROCS) sharing b.N
// durable one-entry appends.
func BenchmarkAppendParallel32(b *testing.B) {
	const writers = 32
	j, err := journal.Open(filepath.Join(benchDir(b), "state"), journal.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	ctx := context.Background()
	before := j.Stats()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				if err := j.Commit(ctx, journal.Entry{Key: fmt.Appendf(nil, "ev/bench/%012d", i), Value: record128(int(i))}); err != nil {
					failed.Store(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if err, _ := failed.Load().(error); err != nil {
		b.Fatal(err)
	}
	after := j.Stats()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "appends/s")
	if syncs := after.Syncs - before.Syncs; syncs > 0 {
		b.ReportMetric(float64(after.Entries-before.Entries)/float64(syncs), "entries/sync")
		// One group's write + sync (+ straggler wait): appends/s is
		// entries/sync divided by this.
		b.ReportMetric(float64(elapsed.Nanoseconds())/float64(syncs), "ns/group")
	}
}
