package initproc_test

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"

	"github.com/overnight-dev/overnight/sandbox/initproc"
)

// A Relay makes a unix-socket HTTP server reachable over loopback TCP, which is what Main does
// inside every sandbox on 127.0.0.1:7070.
func ExampleRelay() {
	dir, _ := os.MkdirTemp("", "relay-example-")
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "gateway.sock")
	gw, _ := net.Listen("unix", socket)
	defer gw.Close()
	go http.Serve(gw, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "gateway got %s %s", r.Method, r.URL.Path)
	}))

	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	defer ln.Close()
	go (&initproc.Relay{Socket: socket}).Serve(ln)

	resp, err := http.Get("http://" + ln.Addr().String() + "/v1/run")
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body))
	// Output: 200 gateway got GET /v1/run
}
