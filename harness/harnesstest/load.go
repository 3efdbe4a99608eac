package harnesstest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sync"
	"sync/atomic"
)

// Hammer GETs urls in turn from n goroutines, as fast as they answer,
// until stop is called; answered counts the answers so far. stop waits for
// the goroutines and is safe to call more than once.
func Hammer(client *http.Client, n int, urls ...string) (answered func() int64, stop func()) {
	var count atomic.Int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			for {
				for _, u := range urls {
					select {
					case <-done:
						return
					default:
					}
					if resp, err := client.Get(u); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						count.Add(1)
					}
				}
			}
		})
	}
	var once sync.Once
	return count.Load, func() { once.Do(func() { close(done); wg.Wait() }) }
}

// AptInstall installs Debian packages (apt-get update, then install), for
// a tool a spec needs that the machine lacks; it needs root.
func AptInstall(ctx context.Context, pkgs ...string) error {
	for _, args := range [][]string{{"update", "-q"}, append([]string{"install", "-y", "-q"}, pkgs...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %v: %w\n%s", args, err, out)
		}
	}
	return nil
}
