package harness_test

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/docker/docker/api/types/image"

	"github.com/overnight-dev/overnight/harness"
	"github.com/overnight-dev/overnight/sandbox/docker"
	"github.com/overnight-dev/overnight/scenarios"
	"github.com/overnight-dev/overnight/scenarios/builtin"
)

// BenchmarkNeverSeenImage measures the first run of an agent image the
// engine has never run against its second run: each iteration imports a
// new image (`docker import`, not timed) holding the overnight binary with
// ENTRYPOINT [agent, deployer], then runs the deploy scenario with it
// twice. It reports the p50 wall time of each (from Run to its result) and
// of their difference.
//
//	go test -run '^$' -bench NeverSeenImage -benchtime 10x ./harness
func BenchmarkNeverSeenImage(b *testing.B) {
	h, bin, done := benchHarnessBin(b)
	defer done()
	ctx := context.Background()
	api, err := docker.Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	data, err := os.ReadFile(bin)
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := builtin.Lookup("deploy")
	var first, second, diff []time.Duration
	run := func(scen *scenarios.Scenario) time.Duration {
		start := time.Now()
		res, err := h.Run(ctx, harness.RunRequest{Scenario: scen, Agent: "own"})
		if err != nil || res.Verdict != harness.VerdictPass {
			b.Fatalf("run: %v %+v", err, res)
		}
		return time.Since(start)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ref := fmt.Sprintf("overnight-bench-agent:%d", time.Now().UnixNano())
		if err := importImage(ctx, api, ref, data); err != nil {
			b.Fatal(err)
		}
		text := bytes.Replace(raw, []byte("\nagents:\n"), []byte("\nagents:\n  own: {image: "+ref+"}\n"), 1)
		scen, err := scenarios.Parse("deploy-own.yaml", text)
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		f := run(scen)
		s := run(scen)
		b.StopTimer()
		first, second, diff = append(first, f), append(second, s), append(diff, f-s)
		if _, err := api.ImageRemove(ctx, ref, image.RemoveOptions{Force: true, PruneChildren: true}); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	b.StopTimer()
	p50 := func(xs []time.Duration) float64 {
		slices.Sort(xs)
		return float64(xs[len(xs)/2].Microseconds()) / 1000
	}
	b.ReportMetric(p50(first), "first-run-p50-ms")
	b.ReportMetric(p50(second), "second-run-p50-ms")
	b.ReportMetric(p50(diff), "first-minus-second-p50-ms")
}

// importImage imports a root filesystem holding bin as /usr/local/bin/agent,
// with ENTRYPOINT [/usr/local/bin/agent, agent, deployer], as ref.
func importImage(ctx context.Context, api interface {
	ImageImport(context.Context, image.ImportSource, string, image.ImportOptions) (io.ReadCloser, error)
}, ref string, bin []byte) error {
	var rootfs bytes.Buffer
	tw := tar.NewWriter(&rootfs)
	for _, d := range []string{"usr/", "usr/local/", "usr/local/bin/"} {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: d, Mode: 0o755}); err != nil {
			return err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "usr/local/bin/agent", Mode: 0o755, Size: int64(len(bin))}); err != nil {
		return err
	}
	if _, err := tw.Write(bin); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	rc, err := api.ImageImport(ctx, image.ImportSource{Source: &rootfs, SourceName: "-"}, ref,
		image.ImportOptions{Changes: []string{`ENTRYPOINT ["/usr/local/bin/agent", "agent", "deployer"]`}})
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, rc)
	return rc.Close()
}
