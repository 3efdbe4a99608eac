package chaos_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/overnight-dev/overnight/chaos"
)

// The gateway serves on a Link; a netdrop fault drops it and heals it, while the http.Server
// keeps serving throughout.
func ExampleLink() {
	dir, err := os.MkdirTemp("", "ovn-ex-")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "gateway.sock")

	link, err := chaos.ListenLink(path, chaos.LinkOptions{HoldMax: 2 * time.Second})
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		io.WriteString(w, "pong")
	})}
	go srv.Serve(link)
	defer srv.Close() // closes the link too

	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
	}}
	ping := func() string {
		resp, err := client.Get("http://gateway/ping")
		if errors.Is(err, syscall.ECONNREFUSED) {
			return "connection refused"
		}
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}

	fmt.Println(link.State(), ping())
	link.Drop()
	fmt.Println(link.State(), ping())
	link.Heal()
	fmt.Println(link.State(), ping())
	// Output:
	// up pong
	// dropped connection refused
	// up pong
}
