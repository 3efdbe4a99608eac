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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	defer client.CloseIdleConnections()
	var last error
	for range 5000 { // 20 ms apart: timeout bounds it first
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+PathDescribe, nil)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			err = fmt.Errorf("describe answered %s", resp.Status)
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
