package chaos_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/chaos"
)

// helperSocketEnv asks the test binary, re-executed, to listen on a unix socket and wait to be
// killed: a real listener dying without unlinking its socket.
const helperSocketEnv = "OVN_LINK_TEST_HELPER_SOCKET"

// TestLinkHelperProcess is not a test: it is the process the stale-socket spec SIGKILLs.
func TestLinkHelperProcess(t *testing.T) {
	path := os.Getenv(helperSocketEnv)
	if path == "" {
		t.Skip("helper process for the stale-socket spec; runs only when re-executed by it")
	}
	ln, err := net.Listen("unix", path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper listen:", err)
		os.Exit(2)
	}
	defer ln.Close()
	// Bounded: the spec kills it long before; and it goes when its parent does.
	parent := os.Getppid()
	for range 600 {
		if os.Getppid() != parent {
			os.Exit(4)
		}
		time.Sleep(100 * time.Millisecond)
	}
	os.Exit(3)
}

// linkGoroutines counts goroutines running the link's code (its accept loops, drains, or a
// server goroutine blocked in one of its connections).
func linkGoroutines() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	count := 0
	for _, g := range strings.Split(string(buf[:n]), "\n\n") {
		if strings.Contains(g, "chaos.(*Link)") || strings.Contains(g, "chaos.(*linkConn)") {
			count++
		}
	}
	return count
}

// linkServer is an http.Server serving on a Link, with a fast handler ("/") and one that blocks
// until released ("/block").
type linkServer struct {
	path     string
	link     *chaos.Link
	srv      *http.Server
	served   chan struct{} // closed when Serve returned
	serveErr error         // what Serve returned, set before served is closed
	hits     atomic.Int64  // handler invocations
	started  chan struct{} // one value per /block request that reached its handler
	release  chan struct{} // closing it lets /block handlers answer
	relOnce  sync.Once
}

func (s *linkServer) releaseBlocked() { s.relOnce.Do(func() { close(s.release) }) }

// shortTempDir makes a short temporary directory (unix socket paths stop at 108 bytes).
func shortTempDir() string {
	dir, err := os.MkdirTemp("", "ovn-lt-")
	DeferCleanup(os.RemoveAll, dir)
	Expect(err).NotTo(HaveOccurred())
	return dir
}

func startLinkServer(opts chaos.LinkOptions) *linkServer {
	s := &linkServer{
		path:    filepath.Join(shortTempDir(), "gw.sock"),
		served:  make(chan struct{}),
		started: make(chan struct{}, 16),
		release: make(chan struct{}),
	}
	DeferCleanup(s.releaseBlocked)
	link, err := chaos.ListenLink(s.path, opts)
	Expect(err).NotTo(HaveOccurred())
	s.link = link
	DeferCleanup(link.Close)

	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("/block", func(w http.ResponseWriter, r *http.Request) {
		s.hits.Add(1)
		s.started <- struct{}{}
		select {
		case <-s.release:
			_, _ = io.WriteString(w, "released")
		case <-r.Context().Done():
		case <-time.After(30 * time.Second):
		}
	})
	s.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		s.serveErr = s.srv.Serve(link)
		close(s.served)
	}()
	DeferCleanup(func() {
		_ = s.srv.Close()
		Eventually(s.served, 5*time.Second).Should(BeClosed())
	})
	return s
}

// client returns an HTTP client that dials the link's socket, one connection per request (so no
// transport retry on a reused connection muddles what the link did).
func (s *linkServer) client() *http.Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", s.path)
		},
		DisableKeepAlives: true,
	}
	DeferCleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 20 * time.Second}
}

type result struct {
	status int
	body   string
	err    error
}

// keptAlive is a raw keep-alive connection through the link that has
// been answered one GET / (with the status returned).
func (s *linkServer) keptAlive() (net.Conn, *bufio.Reader, int) {
	raw, err := net.Dial("unix", s.path)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(raw.Close)
	br := bufio.NewReader(raw)
	_, err = io.WriteString(raw, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n")
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	resp, err := http.ReadResponse(br, nil)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return raw, br, resp.StatusCode
}

func do(c *http.Client, method, path string) result {
	req, err := http.NewRequest(method, "http://gateway"+path, strings.NewReader("{}"))
	if err != nil {
		return result{err: err}
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return result{status: resp.StatusCode, body: string(b), err: err}
}

func doAsync(c *http.Client, method, path string) chan result {
	ch := make(chan result, 1)
	go func() { ch <- do(c, method, path) }()
	return ch
}

// closeWithin closes link and asserts Close returned within d (it waits for the link's
// goroutines, so a leak would show as a hang).
func closeWithin(link *chaos.Link, d time.Duration) {
	GinkgoHelper()
	done := make(chan error, 1)
	go func() { done <- link.Close() }()
	var err error
	Eventually(done, d).Should(Receive(&err), "Close did not return")
	Expect(err).NotTo(HaveOccurred())
}

func expectWorks(c *http.Client) {
	GinkgoHelper()
	r := do(c, http.MethodGet, "/")
	Expect(r.err).NotTo(HaveOccurred())
	Expect(r.status).To(Equal(http.StatusOK))
	Expect(r.body).To(Equal("ok"))
}

// expectClosedByLink asserts err is the link closing the connection, not the client giving up.
func expectClosedByLink(err error) {
	GinkgoHelper()
	Expect(err).To(HaveOccurred())
	var ne net.Error
	if errors.As(err, &ne) {
		Expect(ne.Timeout()).To(BeFalse(), "the client timed out instead of seeing the link close: %v", err)
	}
}

var _ = Describe("Link", func() {
	BeforeEach(func() {
		// Registered first, so it runs last: after every spec's cleanup, none of the link's
		// goroutines may be left.
		DeferCleanup(func() {
			Eventually(linkGoroutines, 5*time.Second, 20*time.Millisecond).Should(BeZero(), "goroutines of the link left after Close")
		})
	})

	It("serves requests normally, with a 0666 socket", func() {
		s := startLinkServer(chaos.LinkOptions{})
		c := s.client()
		expectWorks(c)
		expectWorks(c)
		Expect(s.hits.Load()).To(BeEquivalentTo(2))
		Expect(s.link.State()).To(Equal("up"))
		Expect(s.link.Stats().Accepted).To(BeEquivalentTo(2))
		Expect(s.link.Addr().String()).To(Equal(s.path))
		fi, err := os.Lstat(s.path)
		Expect(err).NotTo(HaveOccurred())
		Expect(fi.Mode() & os.ModeSocket).NotTo(BeZero())
		Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o666)))
	})

	Describe("Drop", func() {
		It("resets an in-flight request, refuses dials, keeps Serve running, and heals on the same path", func() {
			s := startLinkServer(chaos.LinkOptions{})
			c := s.client()
			inflight := doAsync(c, http.MethodPost, "/block")
			Eventually(s.started, 5*time.Second).Should(Receive())

			s.link.Drop()
			Expect(s.link.State()).To(Equal("dropped"))

			var r result
			Eventually(inflight, 5*time.Second).Should(Receive(&r))
			expectClosedByLink(r.err)
			Expect(r.status).To(BeZero(), "no response may arrive")
			Expect(s.link.Stats().Reset).To(BeNumerically(">=", 1))

			_, err := net.Dial("unix", s.path)
			Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeTrue(), "dial while dropped: %v", err)
			r = do(c, http.MethodGet, "/")
			Expect(errors.Is(r.err, syscall.ECONNREFUSED)).To(BeTrue(), "request while dropped: %v", r.err)
			fi, err := os.Lstat(s.path)
			Expect(err).NotTo(HaveOccurred(), "a dead server leaves its socket file")
			Expect(fi.Mode() & os.ModeSocket).NotTo(BeZero())

			Consistently(s.served, 200*time.Millisecond).ShouldNot(BeClosed(), "Serve returned during Drop")
			hits := s.hits.Load()

			s.link.Heal()
			Expect(s.link.State()).To(Equal("up"))
			expectWorks(c)
			Expect(s.hits.Load()).To(Equal(hits + 1))
			fi, err = os.Lstat(s.path)
			Expect(err).NotTo(HaveOccurred())
			Expect(fi.Mode().Perm()).To(Equal(os.FileMode(0o666)))
			Expect(s.served).NotTo(BeClosed())
		})

		It("resets idle keep-alive connections too", func() {
			s := startLinkServer(chaos.LinkOptions{})
			raw, br, status := s.keptAlive()
			Expect(status).To(Equal(http.StatusOK))

			s.link.Drop()
			Expect(raw.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
			_, err := br.ReadByte()
			expectClosedByLink(err)
			Expect(s.link.Stats().Reset).To(BeEquivalentTo(1))
		})
	})

	Describe("Blackhole", func() {
		const hold = 300 * time.Millisecond

		It("accepts new connections but never answers, resets them after HoldMax, and heals", func() {
			s := startLinkServer(chaos.LinkOptions{HoldMax: hold})
			c := s.client()
			s.link.Blackhole()
			Expect(s.link.State()).To(Equal("blackholed"))

			start := time.Now()
			r := do(c, http.MethodGet, "/")
			expectClosedByLink(r.err)
			Expect(r.status).To(BeZero())
			Expect(time.Since(start)).To(BeNumerically(">=", hold), "the connection was not held")
			Expect(s.hits.Load()).To(BeZero(), "the handler ran during a blackhole")
			Expect(s.link.Stats().Blackholed).To(BeEquivalentTo(1))
			Expect(s.served).NotTo(BeClosed())

			s.link.Heal()
			Expect(s.link.State()).To(Equal("up"))
			expectWorks(c)
			Expect(s.hits.Load()).To(BeEquivalentTo(1))
		})

		It("swallows a live connection's next request", func() {
			s := startLinkServer(chaos.LinkOptions{HoldMax: hold})
			raw, br, _ := s.keptAlive()
			Expect(s.hits.Load()).To(BeEquivalentTo(1))

			s.link.Blackhole()
			start := time.Now()
			_, err := io.WriteString(raw, "GET / HTTP/1.1\r\nHost: gw\r\n\r\n")
			Expect(err).NotTo(HaveOccurred())
			Expect(raw.SetReadDeadline(time.Now().Add(10 * time.Second))).To(Succeed())
			_, err = http.ReadResponse(br, nil)
			expectClosedByLink(err)
			Expect(time.Since(start)).To(BeNumerically(">=", hold-20*time.Millisecond))
			Expect(s.hits.Load()).To(BeEquivalentTo(1), "the swallowed request reached the handler")
			Expect(s.link.Stats().Blackholed).To(BeEquivalentTo(1))
		})

		It("swallows the response of a request in flight", func() {
			s := startLinkServer(chaos.LinkOptions{HoldMax: hold})
			c := s.client()
			inflight := doAsync(c, http.MethodPost, "/block")
			Eventually(s.started, 5*time.Second).Should(Receive())
			s.link.Blackhole()
			s.releaseBlocked() // the handler answers now, into the blackhole

			var r result
			Eventually(inflight, 10*time.Second).Should(Receive(&r))
			expectClosedByLink(r.err)
			Expect(r.status).To(BeZero(), "the response crossed the blackhole")
			s.link.Heal()
			expectWorks(c)
		})

		It("resets the swallowed connections at Heal", func() {
			s := startLinkServer(chaos.LinkOptions{HoldMax: time.Hour})
			c := s.client()
			s.link.Blackhole()
			pending := doAsync(c, http.MethodGet, "/")
			Eventually(func() int64 { return s.link.Stats().Blackholed }, 5*time.Second).Should(BeEquivalentTo(1))
			s.link.Heal()
			var r result
			Eventually(pending, 10*time.Second).Should(Receive(&r))
			expectClosedByLink(r.err)
			Expect(s.hits.Load()).To(BeZero())
			expectWorks(c)
		})
	})

	Describe("SetLatency", func() {
		It("delays responses by at least the latency, until Heal", func() {
			s := startLinkServer(chaos.LinkOptions{})
			c := s.client()
			s.link.SetLatency(100*time.Millisecond, 0)
			Expect(s.link.State()).To(Equal("latency"))
			start := time.Now()
			expectWorks(c)
			Expect(time.Since(start)).To(BeNumerically(">=", 100*time.Millisecond))
			st := s.link.Stats()
			Expect(st.Delayed).To(BeNumerically(">=", 1))
			Expect(st.DelayTotal).To(Equal(time.Duration(st.Delayed) * 100 * time.Millisecond))

			s.link.Heal()
			Expect(s.link.State()).To(Equal("up"))
			expectWorks(c)
			Expect(s.link.Stats().Delayed).To(Equal(st.Delayed), "a write was delayed after Heal")
		})

		It("lets a delayed response go at once when healed", func() {
			s := startLinkServer(chaos.LinkOptions{})
			c := s.client()
			s.link.SetLatency(time.Hour, 0)
			pending := doAsync(c, http.MethodGet, "/")
			Eventually(func() int64 { return s.link.Stats().Delayed }, 5*time.Second).Should(BeNumerically(">=", 1))
			Consistently(pending, 100*time.Millisecond).ShouldNot(Receive())
			// Heal as a cleanup path would: after the context that applied the fault is gone.
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			<-ctx.Done()
			s.link.Heal()
			var r result
			Eventually(pending, 10*time.Second).Should(Receive(&r))
			Expect(r.err).NotTo(HaveOccurred())
			Expect(r.body).To(Equal("ok"))
		})

		// drawSequence writes n one-byte responses through a link with latency d+jitter and returns
		// the delay drawn for each write.
		drawSequence := func(rnd *rand.Rand, n int) []time.Duration {
			path := filepath.Join(shortTempDir(), "gw.sock")
			link, err := chaos.ListenLink(path, chaos.LinkOptions{Rand: rnd})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(link.Close)
			client, err := net.Dial("unix", path)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(client.Close)
			server, err := link.Accept()
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(server.Close)

			link.SetLatency(time.Millisecond, 3*time.Millisecond)
			var got []time.Duration
			buf := make([]byte, 1)
			for range n {
				before := link.Stats().DelayTotal
				_, err := server.Write([]byte("x"))
				Expect(err).NotTo(HaveOccurred())
				got = append(got, link.Stats().DelayTotal-before)
				_, err = io.ReadFull(client, buf)
				Expect(err).NotTo(HaveOccurred())
			}
			return got
		}

		It("lets no delayed response through when dropped", func() {
			s := startLinkServer(chaos.LinkOptions{})
			c := s.client()
			s.link.SetLatency(time.Hour, 0)
			pending := doAsync(c, http.MethodGet, "/")
			Eventually(func() int64 { return s.link.Stats().Delayed }, 5*time.Second).Should(BeNumerically(">=", 1))
			s.link.Drop()
			var r result
			Eventually(pending, 10*time.Second).Should(Receive(&r))
			expectClosedByLink(r.err)
			Expect(r.status).To(BeZero(), "a delayed response crossed the Drop")
			Expect(s.link.Stats().Reset).To(BeEquivalentTo(1))
		})

		It("draws jitter from the given Rand, deterministically", func() {
			const n = 8
			got := drawSequence(rand.New(rand.NewPCG(42, 1)), n)
			ref := rand.New(rand.NewPCG(42, 1))
			var want []time.Duration
			for range n {
				want = append(want, time.Millisecond+time.Duration(ref.Int64N(int64(3*time.Millisecond))))
			}
			Expect(got).To(Equal(want))
			Expect(drawSequence(rand.New(rand.NewPCG(42, 1)), n)).To(Equal(got))
			Expect(drawSequence(rand.New(rand.NewPCG(43, 1)), n)).NotTo(Equal(got))
		})

		It("is deterministic without a Rand too", func() {
			Expect(drawSequence(nil, 5)).To(Equal(drawSequence(nil, 5)))
		})
	})

	Describe("ListenLink", func() {
		It("replaces a socket left by a SIGKILLed listener", func() {
			path := filepath.Join(shortTempDir(), "gw.sock")
			cmd := exec.Command(os.Args[0], "-test.run=^TestLinkHelperProcess$")
			cmd.Env = append(os.Environ(), helperSocketEnv+"="+path)
			cmd.Stderr = GinkgoWriter
			Expect(cmd.Start()).To(Succeed())
			DeferCleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			Eventually(func() error {
				c, err := net.Dial("unix", path)
				if err == nil {
					c.Close()
				}
				return err
			}, 10*time.Second, 20*time.Millisecond).Should(Succeed(), "the helper never listened")

			_, err := chaos.ListenLink(path, chaos.LinkOptions{})
			Expect(errors.Is(err, chaos.ErrSocketInUse)).To(BeTrue(), "a live listener in another process: %v", err)

			Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
			_ = cmd.Wait()
			_, err = net.Dial("unix", path)
			Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeTrue(), "the killed listener's socket should be stale: %v", err)

			link, err := chaos.ListenLink(path, chaos.LinkOptions{})
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(link.Close)
			client, err := net.Dial("unix", path)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(client.Close)
			server, err := link.Accept()
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(server.Close)
			_, err = server.Write([]byte("hi"))
			Expect(err).NotTo(HaveOccurred())
			buf := make([]byte, 2)
			_, err = io.ReadFull(client, buf)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(buf)).To(Equal("hi"))
		})

		It("refuses a regular file and leaves it untouched", func() {
			path := filepath.Join(shortTempDir(), "gw.sock")
			Expect(os.WriteFile(path, []byte("precious"), 0o600)).To(Succeed())
			_, err := chaos.ListenLink(path, chaos.LinkOptions{})
			Expect(errors.Is(err, chaos.ErrNotSocket)).To(BeTrue(), "got %v", err)
			Expect(err.Error()).To(ContainSubstring(path))
			b, err := os.ReadFile(path)
			Expect(err).NotTo(HaveOccurred())
			Expect(string(b)).To(Equal("precious"))
		})

		It("refuses a live listener in this process and leaves it working", func() {
			path := filepath.Join(shortTempDir(), "gw.sock")
			ln, err := net.Listen("unix", path)
			Expect(err).NotTo(HaveOccurred())
			DeferCleanup(ln.Close)
			go func() {
				for {
					c, err := ln.Accept()
					if err != nil {
						return
					}
					c.Close()
				}
			}()
			_, err = chaos.ListenLink(path, chaos.LinkOptions{})
			Expect(errors.Is(err, chaos.ErrSocketInUse)).To(BeTrue(), "got %v", err)
			c, err := net.Dial("unix", path)
			Expect(err).NotTo(HaveOccurred())
			c.Close()
		})

		It("refuses a path of 108 bytes or more", func() {
			path := "/tmp/" + strings.Repeat("x", 103)
			Expect(len(path)).To(Equal(108))
			_, err := chaos.ListenLink(path, chaos.LinkOptions{})
			Expect(errors.Is(err, chaos.ErrPathTooLong)).To(BeTrue(), "got %v", err)
			_, err = os.Lstat(path)
			Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue())
		})
	})

	Describe("Heal and Close", func() {
		It("are idempotent, and the faults do nothing after Close", func() {
			s := startLinkServer(chaos.LinkOptions{})
			c := s.client()
			s.link.Heal()
			s.link.Heal()
			expectWorks(c)
			s.link.Drop()
			s.link.Drop()
			s.link.Heal()
			s.link.Heal()
			expectWorks(c)
			s.link.SetLatency(time.Millisecond, 0)
			s.link.SetLatency(0, 0) // is Heal
			Expect(s.link.State()).To(Equal("up"))

			closeWithin(s.link, 5*time.Second)
			closeWithin(s.link, 5*time.Second)
			Expect(s.link.State()).To(Equal("closed"))
			_, err := s.link.Accept()
			Expect(errors.Is(err, net.ErrClosed)).To(BeTrue(), "got %v", err)
			s.link.Drop()
			s.link.Blackhole()
			s.link.SetLatency(time.Second, 0)
			s.link.Heal()
			Expect(s.link.State()).To(Equal("closed"))
			_, err = os.Lstat(s.path)
			Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "Close leaves no socket file")
		})

		It("switches from one fault to another", func() {
			s := startLinkServer(chaos.LinkOptions{HoldMax: time.Hour})
			c := s.client()
			s.link.Drop()
			s.link.Blackhole() // listens again, swallowing
			Expect(s.link.State()).To(Equal("blackholed"))
			pending := doAsync(c, http.MethodGet, "/")
			Eventually(func() int64 { return s.link.Stats().Blackholed }, 5*time.Second).Should(BeEquivalentTo(1))
			s.link.SetLatency(time.Millisecond, 0) // stops swallowing: the held connection is reset
			var r result
			Eventually(pending, 10*time.Second).Should(Receive(&r))
			expectClosedByLink(r.err)
			expectWorks(c)
			s.link.Drop()
			_, err := net.Dial("unix", s.path)
			Expect(errors.Is(err, syscall.ECONNREFUSED)).To(BeTrue(), "got %v", err)
			s.link.Heal()
			expectWorks(c)
			Expect(s.hits.Load()).To(BeEquivalentTo(2))
		})

		It("Close during Drop returns promptly, ends Serve and removes the socket", func() {
			s := startLinkServer(chaos.LinkOptions{})
			expectWorks(s.client())
			s.link.Drop()
			closeWithin(s.link, 5*time.Second)
			Eventually(s.served, 5*time.Second).Should(BeClosed())
			Expect(errors.Is(s.serveErr, net.ErrClosed)).To(BeTrue(), "Serve returned %v", s.serveErr)
			_, err := os.Lstat(s.path)
			Expect(errors.Is(err, os.ErrNotExist)).To(BeTrue(), "Close leaves no socket file")
		})

		It("Close during Blackhole returns promptly, resets held connections and ends Serve", func() {
			s := startLinkServer(chaos.LinkOptions{HoldMax: time.Hour})
			c := s.client()
			s.link.Blackhole()
			pending := doAsync(c, http.MethodGet, "/")
			Eventually(func() int64 { return s.link.Stats().Blackholed }, 5*time.Second).Should(BeEquivalentTo(1))
			closeWithin(s.link, 5*time.Second)
			Eventually(s.served, 5*time.Second).Should(BeClosed())
			Expect(errors.Is(s.serveErr, net.ErrClosed)).To(BeTrue(), "Serve returned %v", s.serveErr)
			var r result
			Eventually(pending, 10*time.Second).Should(Receive(&r))
			expectClosedByLink(r.err)
			Expect(linkGoroutines()).To(BeZero())
		})

		It("Close during latency releases delayed writes", func() {
			s := startLinkServer(chaos.LinkOptions{})
			c := s.client()
			s.link.SetLatency(time.Hour, 0)
			pending := doAsync(c, http.MethodGet, "/")
			Eventually(func() int64 { return s.link.Stats().Delayed }, 5*time.Second).Should(BeNumerically(">=", 1))
			closeWithin(s.link, 5*time.Second)
			var r result
			Eventually(pending, 10*time.Second).Should(Receive(&r))
			expectClosedByLink(r.err)
			Eventually(s.served, 5*time.Second).Should(BeClosed())
		})
	})

	It("survives faults switched under concurrent load", func() {
		s := startLinkServer(chaos.LinkOptions{HoldMax: 50 * time.Millisecond})
		c := s.client()
		c.Timeout = 10 * time.Second
		var wg sync.WaitGroup
		stop := make(chan struct{})
		var ok, failed atomic.Int64
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; i < 200; i++ {
					select {
					case <-stop:
						return
					default:
					}
					if r := do(c, http.MethodGet, "/"); r.err == nil && r.body == "ok" {
						ok.Add(1)
					} else {
						failed.Add(1)
					}
				}
			}()
		}
		faults := []func(){
			s.link.Drop, s.link.Blackhole, s.link.Heal,
			func() { s.link.SetLatency(time.Millisecond, time.Millisecond) },
		}
		rnd := rand.New(rand.NewPCG(7, 7))
		for range 40 {
			faults[rnd.IntN(len(faults))]()
			_ = s.link.State()
			_ = s.link.Stats()
			time.Sleep(10 * time.Millisecond)
		}
		s.link.Heal()
		close(stop)
		wg.Wait()
		Expect(s.served).NotTo(BeClosed(), "Serve returned under faults")
		Expect(ok.Load()).To(BeNumerically(">", 0))
		expectWorks(c)
		GinkgoWriter.Printf("concurrent load: %d ok, %d failed, stats %+v\n", ok.Load(), failed.Load(), s.link.Stats())
	})
})
