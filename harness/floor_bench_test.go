package harness_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/overnight-dev/overnight/harness/harnesstest"
	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

// BenchmarkLoadgenFloor is the floor under reflect.BenchmarkReplay: the same
// load generator (the built-in loadgen agent of the overnight binary, through
// the Go SDK, in a sandbox, on the bind-mounted gateway socket) making the
// same 10,000 requests, one after another, to a plain Go HTTP server that
// reads each request and answers {} — no gateway, no journal, no world, no
// JSON work. What BenchmarkReplay measures above this rate is the harness's
// share. Timed inside the sandbox, as there.
//
//	GOMAXPROCS=1 go test -run '^$' -bench LoadgenFloor -benchtime 3x ./harness
func BenchmarkLoadgenFloor(b *testing.B) {
	const requests = 10000
	ctx := context.Background()
	dir := b.TempDir()
	bin := filepath.Join(dir, "overnight-sandbox")
	if err := harnesstest.Build(ctx, "./cmd/overnight-sandbox", bin, fmt.Sprintf("floor-%d", time.Now().UnixNano())); err != nil {
		b.Fatal(err)
	}
	api, err := docker.Connect(ctx)
	if err != nil {
		b.Fatal(err)
	}
	state := filepath.Join(dir, "state") // names this benchmark's containers (labels) only
	eng := docker.New(api, docker.Options{StateHash: sandbox.StateHash(state)})
	image, err := eng.EnsureImage(ctx, docker.ImageSpec{InitBinary: bin})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		harnesstest.Leftovers(context.Background(), api, state)
		_ = eng.RemoveImage(context.Background(), image)
	})
	sockDir, removeDir, err := sandbox.NewSocketDir()
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = removeDir() })
	ln, err := sandbox.ListenSocket(filepath.Join(sockDir, sandbox.SocketName))
	if err != nil {
		b.Fatal(err)
	}
	reports := make(chan []byte, 1)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.URL.Path == "/v1/events" && bytes.Contains(body, []byte(`"type":"loadgen"`)) {
			reports <- body
		}
		_, _ = w.Write([]byte("{}\n"))
	})}
	go func() { _ = srv.Serve(ln) }()
	b.Cleanup(func() { _ = srv.Close() })

	var rates []float64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sb, err := eng.Create(ctx, docker.ContainerSpec{
			RunID: fmt.Sprintf("floor-%d-%d", time.Now().UnixNano(), i), Attempt: 1, Image: image,
			Cmd:       []string{sandbox.InitPath, "agent", "loadgen", "--requests", fmt.Sprint(requests)},
			SocketDir: sockDir,
			Env:       map[string]string{"OVERNIGHT_SOCKET": sandbox.GatewaySocket, "OVERNIGHT_URL": sandbox.RelayURL, "OVERNIGHT_TOKEN": "floor"},
		})
		if err != nil {
			b.Fatal(err)
		}
		rate, err := floorRate(ctx, eng, sb.ID, reports)
		if rerr := eng.Remove(context.WithoutCancel(ctx), sb.ID); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			b.Fatal(err)
		}
		rates = append(rates, float64(requests)/rate.Seconds())
	}
	b.StopTimer()
	slices.Sort(rates)
	b.ReportMetric(rates[len(rates)/2], "requests/s")
	b.ReportMetric(1e6/rates[len(rates)/2], "round-trip-µs")
}

// floorRate runs sandbox id to its end and returns the time its load
// generator reported for its requests.
func floorRate(ctx context.Context, eng *docker.Engine, id string, reports <-chan []byte) (time.Duration, error) {
	if err := eng.Start(ctx, id); err != nil {
		return 0, err
	}
	wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	code, err := eng.Wait(wctx, id)
	if err != nil {
		return 0, err
	}
	select {
	case body := <-reports:
		var ev struct {
			Data struct {
				ElapsedMS int64 `json:"elapsed_ms"`
			} `json:"data"`
		}
		if err := json.Unmarshal(body, &ev); err != nil || ev.Data.ElapsedMS <= 0 {
			return 0, fmt.Errorf("loadgen report %s: %v", body, err)
		}
		return time.Duration(ev.Data.ElapsedMS) * time.Millisecond, nil
	default:
		out, errOut, _ := eng.Logs(ctx, id)
		return 0, fmt.Errorf("loadgen exited %d without its report: %s %s", code, out, errOut)
	}
}
