package remote

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// WaitDescribe polls describe at base, 20 ms apart, until the world answers
// it 200, timeout passes, or done is closed (the world's process or
// container ended: the error is exited's text). It is how a world just
// started is waited for (the harness's command and image worlds, the
// conformance kit's).
func WaitDescribe(ctx context.Context, base string, timeout time.Duration, done <-chan struct{}, exited func() string) error {
	return WaitHTTP(ctx, http.MethodGet, base+PathDescribe, timeout, done, exited, func(status int) error {
		if status != http.StatusOK {
			return fmt.Errorf("describe answered %d %s", status, http.StatusText(status))
		}
		return nil
	})
}

// WaitHTTP sends method requests to url, 20 ms apart, until accept takes
// the status of an answer (returns nil), timeout passes, or done is closed
// (the server's process or container ended: the error is exited's text).
// A server that does not answer yet (the connection refused or reset, as a
// published port does before the container listens) is waited for like one
// whose answer accept refuses.
func WaitHTTP(ctx context.Context, method, url string, timeout time.Duration, done <-chan struct{}, exited func() string, accept func(status int) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	var last error
	for range 5000 { // 20 ms apart: timeout bounds it first
		req, err := http.NewRequestWithContext(ctx, method, url, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if err = accept(resp.StatusCode); err == nil {
				return nil
			}
		}
		last = err
		select {
		case <-done:
			return errors.New(exited())
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %v)", context.Cause(ctx), last)
		case <-time.After(20 * time.Millisecond):
		}
	}
	return last
}
