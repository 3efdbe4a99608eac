package initproc_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox/initproc"
)

// startRelay serves a Relay to socket on a free loopback port and returns that address.
func startRelay(socket string) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(ln.Close)
	r := &initproc.Relay{Socket: socket, DialTimeout: time.Second}
	go func() { _ = r.Serve(ln) }()
	return ln.Addr().String()
}

func unixListener() (net.Listener, string) {
	socket := filepath.Join(GinkgoT().TempDir(), "gw.sock")
	ln, err := net.Listen("unix", socket)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() { _ = ln.Close() })
	return ln, socket
}

func randomBytes(n int, seed uint64) []byte {
	rng := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

var _ = Describe("Relay", func() {
	It("carries 1 MiB each way intact, with keep-alive over one gateway connection", func() {
		ln, socket := unixListener()
		var conns atomic.Int32
		reply := randomBytes(1<<20, 2)
		srv := &http.Server{
			Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, err := io.ReadAll(r.Body)
				if err != nil {
					http.Error(w, err.Error(), 500)
					return
				}
				w.Header().Set("X-Request-Sum", sum(body))
				_, _ = w.Write(reply)
			}),
			ConnState: func(_ net.Conn, s http.ConnState) {
				if s == http.StateNew {
					conns.Add(1)
				}
			},
		}
		go func() { _ = srv.Serve(ln) }()
		DeferCleanup(srv.Close)
		addr := startRelay(socket)

		client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
		DeferCleanup(client.CloseIdleConnections)
		for i := range 3 {
			body := randomBytes(1<<20, uint64(10+i))
			resp, err := client.Post("http://"+addr+"/v1/effects", "application/octet-stream", bytes.NewReader(body))
			Expect(err).NotTo(HaveOccurred())
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			Expect(err).NotTo(HaveOccurred())
			Expect(resp.Header.Get("X-Request-Sum")).To(Equal(sum(body)))
			Expect(sum(got)).To(Equal(sum(reply)))
		}
		Expect(conns.Load()).To(Equal(int32(1)), "three keep-alive requests use one relayed connection")
	})

	It("passes a half-close on, so a client that shuts down writing still gets the answer", func() {
		ln, socket := unixListener()
		// The server answers only after it has read to EOF, so the answer exists only if the
		// relay passed the client's half-close on.
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
			in, _ := io.ReadAll(c)
			_, _ = c.Write([]byte(sum(in)))
		}()
		addr := startRelay(socket)

		c, err := net.Dial("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Close)
		Expect(c.SetDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
		payload := randomBytes(300_000, 7)
		_, err = c.Write(payload)
		Expect(err).NotTo(HaveOccurred())
		Expect(c.(*net.TCPConn).CloseWrite()).To(Succeed())
		answer, err := io.ReadAll(c)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(answer)).To(Equal(sum(payload)))
	})

	It("closes the client's connection when the gateway socket cannot be dialled", func() {
		addr := startRelay(filepath.Join(GinkgoT().TempDir(), "missing.sock"))
		c, err := net.Dial("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Close)
		Expect(c.SetDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
		n, err := c.Read(make([]byte, 16))
		Expect(n).To(Equal(0))
		Expect(err).To(MatchError(io.EOF))
	})

	It("delivers what the gateway wrote before it closed, then ends the client connection", func() {
		ln, socket := unixListener()
		go func() {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = c.Write([]byte("partial"))
			c.Close()
		}()
		addr := startRelay(socket)
		c, err := net.Dial("tcp", addr)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(c.Close)
		Expect(c.SetDeadline(time.Now().Add(5 * time.Second))).To(Succeed())
		got, err := io.ReadAll(c)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(got)).To(Equal("partial"))
	})
})
