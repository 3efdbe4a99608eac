package chaos

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The states a Link reports (Link.State).
const (
	LinkUp         = "up"
	LinkDropped    = "dropped"
	LinkBlackholed = "blackholed"
	LinkLatency    = "latency"
	LinkClosed     = "closed"
)

// DefaultHoldMax is how long a blackholed connection is held open before it is reset when
// LinkOptions.HoldMax is zero: "a couple of real seconds" (DESIGN.md, "Time, seeds, determinism").
const DefaultHoldMax = 2 * time.Second

// maxSocketPath is the longest unix socket path the kernel takes: sun_path is 108 bytes
// including the terminating NUL.
const maxSocketPath = 107

// staleProbeTimeout bounds the dial ListenLink makes to tell a live socket from a stale one.
const staleProbeTimeout = time.Second

// Errors ListenLink returns for a path it will not take over.
var (
	// ErrSocketInUse: something is listening on the path already (another harness, or a
	// forgotten one). Stop it, or choose another state directory.
	ErrSocketInUse = errors.New("socket is in use by a live listener")
	// ErrNotSocket: the path exists and is not a unix socket; it is left untouched.
	ErrNotSocket = errors.New("path exists and is not a unix socket")
	// ErrPathTooLong: unix socket paths stop at 107 bytes (108 with the NUL).
	ErrPathTooLong = errors.New("unix socket path too long")
)

// LinkOptions configure a Link. Zero values take the documented defaults.
type LinkOptions struct {
	// HoldMax bounds how long a blackholed connection is held open before it is reset.
	// Default DefaultHoldMax (2s).
	HoldMax time.Duration
	// Rand draws latency jitter. Default: a fixed-seed source, so runs are deterministic. The
	// harness passes the link's seeded stream. The Link serialises its use of Rand; do not
	// share it with other goroutines.
	Rand *rand.Rand
	// Logger receives fault transitions (Info) and per-connection detail (Debug). Default: quiet.
	Logger *slog.Logger
}

// LinkStats counts what the faults did to real connections, so a checker can tell whether the
// agent really met a fault. Dials refused while the link is dropped never reach the process (the
// kernel answers ECONNREFUSED), so they are not counted; Reset counts what Drop did.
type LinkStats struct {
	Accepted     int64         // connections the link accepted, whatever happened to them next
	Reset        int64         // live connections closed by Drop (the peer sees EOF or ECONNRESET)
	Blackholed   int64         // connections swallowed by Blackhole (new ones and live ones)
	Delayed      int64         // response writes delayed by SetLatency
	DelayTotal   time.Duration // sum of the delays drawn for those writes
	HealFailures int64         // Heals that could not listen on the socket again (see the log)
	AcceptErrors int64         // errors from the underlying listener other than its closing
}

// Link is the agent's link to the gateway: it owns the unix socket at a path and is the
// net.Listener the gateway's http.Server serves on. Its faults act on real connections:
//
//   - Drop closes every live connection and the listening socket itself, leaving the socket
//     file behind, so a dial gets ECONNREFUSED exactly as from a dead server.
//   - Blackhole accepts new connections but never hands them to the server; what the client
//     sends is read and discarded. Connections the server already holds are swallowed too:
//     what the server reads from them is discarded (its Read blocks) and what it writes is
//     discarded while reported as written. Every swallowed connection is closed HoldMax after
//     it was swallowed, or at Heal, Drop or Close, whichever comes first — a swallowed
//     connection has lost bytes, so it is never handed back intact.
//   - SetLatency delays every non-empty write the server makes (each response write, and each
//     flushed chunk of a streamed response) by d plus a jitter in [0, jitter) drawn from Rand.
//
// One fault is active at a time: Drop, Blackhole and SetLatency each replace whatever was
// active, and Heal returns the link to "up". Accept keeps blocking across faults
// (http.Server.Serve does not return while a fault is active) and returns net.ErrClosed only
// after Close. Everything is safe for concurrent use.
type Link struct {
	path    string
	holdMax time.Duration
	log     *slog.Logger

	acceptCh chan net.Conn // conns for Accept; unbuffered
	closedCh chan struct{} // closed by Close
	wg       sync.WaitGroup

	mu      sync.Mutex
	rnd     *rand.Rand
	state   string
	ln      *net.UnixListener // nil while dropped or closed
	stale   os.FileInfo       // the socket file Drop left behind, removed on Heal or Close
	conns   map[*linkConn]struct{}
	latency time.Duration
	jitter  time.Duration
	changed chan struct{} // closed and replaced on every state change; wakes delayed writes

	accepted, reset, blackholed, delayed, delayTotal, healFailures, acceptErrors atomic.Int64
}

// ListenLink listens on the unix socket at path (mode 0666: the sandbox's non-root user must
// reach it; the per-attempt token guards it). A stale socket — a socket file nobody listens on,
// left by a killed process — is removed first; a live socket (ErrSocketInUse) or a path that is
// not a socket (ErrNotSocket) is refused and left untouched. path must be shorter than 108
// bytes (ErrPathTooLong).
func ListenLink(path string, opts LinkOptions) (*Link, error) {
	if len(path) > maxSocketPath {
		return nil, fmt.Errorf("listen link %s: %w (%d bytes, the limit is %d): use a shorter directory, e.g. under /tmp", path, ErrPathTooLong, len(path), maxSocketPath)
	}
	if path == "" {
		return nil, errors.New("listen link: empty socket path: pass the socket's path")
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	ln, err := listenUnix(path)
	if err != nil {
		return nil, err
	}
	l := &Link{
		path:     path,
		holdMax:  opts.HoldMax,
		log:      opts.Logger,
		rnd:      opts.Rand,
		acceptCh: make(chan net.Conn),
		closedCh: make(chan struct{}),
		state:    LinkUp,
		ln:       ln,
		conns:    map[*linkConn]struct{}{},
		changed:  make(chan struct{}),
	}
	if l.holdMax <= 0 {
		l.holdMax = DefaultHoldMax
	}
	if l.log == nil {
		l.log = slog.New(slog.DiscardHandler)
	}
	if l.rnd == nil {
		l.rnd = rand.New(rand.NewPCG(0x6f76, 0x6e74)) // fixed seed: deterministic by default
	}
	l.wg.Add(1)
	go l.serve(ln)
	return l, nil
}

// removeStaleSocket removes path if it is a unix socket nobody listens on.
func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("listen link %s: inspect existing path: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("listen link %s: %w (mode %s): move it away or choose another path", path, ErrNotSocket, fi.Mode())
	}
	c, err := net.DialTimeout("unix", path, staleProbeTimeout)
	if err == nil {
		_ = c.Close()
		return fmt.Errorf("listen link %s: %w: stop the process serving it, or choose another state directory", path, ErrSocketInUse)
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		// Stale: the listener died without unlinking it.
	case errors.Is(err, syscall.EAGAIN):
		// The listener's backlog is full: it is alive.
		return fmt.Errorf("listen link %s: %w (its backlog is full): stop the process serving it, or choose another state directory", path, ErrSocketInUse)
	default:
		return fmt.Errorf("listen link %s: cannot tell whether the existing socket is stale: %w; remove it by hand if nothing uses it", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("listen link %s: remove stale socket: %w", path, err)
	}
	return nil
}

func listenUnix(path string) (*net.UnixListener, error) {
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen link %s: %w", path, err)
	}
	if err := os.Chmod(path, 0o666); err != nil {
		_ = ln.Close()
		return nil, fmt.Errorf("listen link %s: make the socket usable by the sandbox user (chmod 0666): %w", path, err)
	}
	return ln, nil
}

// serve accepts from one underlying listener until it is closed (by Drop or Close).
func (l *Link) serve(ln *net.UnixListener) {
	defer l.wg.Done()
	backoff := 5 * time.Millisecond
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// EMFILE and the like: keep the link up, as http.Server would, with a bounded back-off.
			l.acceptErrors.Add(1)
			l.log.Warn("link accept failed; retrying", "path", l.path, "err", err, "backoff", backoff)
			t := time.NewTimer(backoff)
			select {
			case <-t.C:
			case <-l.closedCh:
				t.Stop()
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 5 * time.Millisecond
		c := &linkConn{Conn: nc, link: l, done: make(chan struct{})}
		l.mu.Lock()
		if l.ln != ln { // dropped (or closed) between the kernel's accept and ours
			l.mu.Unlock()
			_ = nc.Close()
			l.reset.Add(1)
			continue
		}
		l.accepted.Add(1)
		l.conns[c] = struct{}{}
		if l.state == LinkBlackholed {
			l.holdLocked(c)
			l.wg.Add(1)
			l.mu.Unlock()
			go l.drain(c)
			continue
		}
		l.mu.Unlock()
		select {
		case l.acceptCh <- c:
		case <-l.closedCh:
			_ = c.Close()
			return
		}
	}
}

// drain reads and discards what a swallowed connection's client sends until it is closed.
func (l *Link) drain(c *linkConn) {
	defer l.wg.Done()
	buf := make([]byte, 4096)
	for {
		if _, err := c.Conn.Read(buf); err != nil {
			return
		}
	}
}

// holdLocked swallows c and schedules its reset after HoldMax. l.mu must be held.
func (l *Link) holdLocked(c *linkConn) {
	if c.held {
		return
	}
	c.held = true
	l.blackholed.Add(1)
	c.holdTimer = time.AfterFunc(l.holdMax, func() {
		l.log.Debug("link: blackholed connection reset after HoldMax", "path", l.path, "hold", l.holdMax)
		_ = c.Close()
	})
}

// Accept waits for the next connection the link hands to the server. It blocks across faults
// and returns an error wrapping net.ErrClosed only after Close.
func (l *Link) Accept() (net.Conn, error) {
	select {
	case <-l.closedCh:
		return nil, l.errClosed()
	default:
	}
	select {
	case c := <-l.acceptCh:
		return c, nil
	case <-l.closedCh:
		return nil, l.errClosed()
	}
}

func (l *Link) errClosed() error {
	return &net.OpError{Op: "accept", Net: "unix", Addr: l.Addr(), Err: net.ErrClosed}
}

// Addr is the socket's address; it stays the same across Drop and Heal.
func (l *Link) Addr() net.Addr { return &net.UnixAddr{Name: l.path, Net: "unix"} }

// Path is the socket's path.
func (l *Link) Path() string { return l.path }

// Close closes the listening socket (removing the socket file, including one Drop left) and
// every connection, then waits for the link's goroutines to end. Accept returns net.ErrClosed
// from then on, and the fault methods do nothing. Close is idempotent.
func (l *Link) Close() error {
	l.mu.Lock()
	if l.state == LinkClosed {
		l.mu.Unlock()
		return nil
	}
	prev := l.state
	l.state = LinkClosed
	close(l.closedCh)
	l.bumpLocked()
	ln := l.ln
	l.ln = nil
	conns := l.takeConnsLocked(func(*linkConn) bool { return true })
	var errs []error
	if ln != nil {
		ln.SetUnlinkOnClose(true)
		if err := ln.Close(); err != nil {
			errs = append(errs, fmt.Errorf("close link %s: %w", l.path, err))
		}
	} else if err := l.removeStaleLocked(); err != nil {
		errs = append(errs, err)
	}
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	l.wg.Wait()
	l.log.Info("link closed", "path", l.path, "was", prev)
	return errors.Join(errs...)
}

// Drop resets every live connection and refuses new ones until Heal: nothing listens on the
// socket meanwhile (a dial gets ECONNREFUSED), exactly like a dead server. The socket file
// stays, as a dead server's would. Drop replaces any other active fault.
func (l *Link) Drop() {
	l.mu.Lock()
	if l.state == LinkClosed || l.state == LinkDropped {
		l.mu.Unlock()
		return
	}
	prev := l.state
	l.state = LinkDropped
	l.latency, l.jitter = 0, 0
	l.bumpLocked()
	ln := l.ln
	l.ln = nil
	ln.SetUnlinkOnClose(false)
	err := ln.Close()
	if fi, serr := os.Lstat(l.path); serr == nil {
		l.stale = fi
	}
	conns := l.takeConnsLocked(func(*linkConn) bool { return true })
	l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	l.reset.Add(int64(len(conns)))
	l.log.Info("link dropped", "path", l.path, "was", prev, "reset", len(conns), "close_err", err)
}

// Blackhole makes the link swallow traffic until Heal: new connections are accepted but never
// answered (what the client sends is read and discarded) and live connections stop answering
// too; each swallowed connection is reset HoldMax of real time after it was swallowed.
// Blackhole replaces any other active fault.
func (l *Link) Blackhole() {
	l.mu.Lock()
	if l.state == LinkClosed || l.state == LinkBlackholed {
		l.mu.Unlock()
		return
	}
	prev, ok := l.enterLocked(LinkBlackholed, 0, 0)
	if !ok {
		l.mu.Unlock()
		return
	}
	n := 0
	for c := range l.conns {
		if !c.held {
			l.holdLocked(c)
			n++
		}
	}
	l.mu.Unlock()
	l.log.Info("link blackholed", "path", l.path, "was", prev, "live_swallowed", n, "hold_max", l.holdMax)
}

// SetLatency delays every response write by d plus a uniform jitter in [0, jitter), until Heal.
// Negative values count as zero; SetLatency(0, 0) is Heal. It replaces any other active fault;
// writes already waiting are re-drawn with the new values.
func (l *Link) SetLatency(d, jitter time.Duration) {
	d, jitter = max(d, 0), max(jitter, 0)
	if d == 0 && jitter == 0 {
		l.Heal()
		return
	}
	l.mu.Lock()
	if l.state == LinkClosed {
		l.mu.Unlock()
		return
	}
	prev, ok := l.enterLocked(LinkLatency, d, jitter)
	if !ok {
		l.mu.Unlock()
		return
	}
	l.releaseHeldAndUnlock()
	l.log.Info("link latency", "path", l.path, "was", prev, "delay", d, "jitter", jitter)
}

// Heal undoes whatever fault is active: listens again after Drop, resets the connections
// Blackhole swallowed and stops swallowing, removes latency (writes waiting on it go out at
// once). It is idempotent, needs no context (it works from a cleanup path after a cancelled
// one) and does nothing after Close. If the socket cannot be listened on again, the link stays
// dropped, the failure is logged and counted (LinkStats.HealFailures), and a later Heal retries.
func (l *Link) Heal() {
	l.mu.Lock()
	if l.state == LinkClosed || l.state == LinkUp {
		l.mu.Unlock()
		return
	}
	prev, ok := l.enterLocked(LinkUp, 0, 0)
	if !ok {
		l.mu.Unlock()
		return
	}
	n := l.releaseHeldAndUnlock()
	l.log.Info("link healed", "path", l.path, "was", prev, "swallowed_reset", n)
}

// State reports the active fault: LinkUp, LinkDropped, LinkBlackholed or LinkLatency
// ("up", "dropped", "blackholed", "latency"), or LinkClosed after Close.
func (l *Link) State() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.state
}

// Stats reports what the faults did to real connections so far.
func (l *Link) Stats() LinkStats {
	return LinkStats{
		Accepted:     l.accepted.Load(),
		Reset:        l.reset.Load(),
		Blackholed:   l.blackholed.Load(),
		Delayed:      l.delayed.Load(),
		DelayTotal:   time.Duration(l.delayTotal.Load()),
		HealFailures: l.healFailures.Load(),
		AcceptErrors: l.acceptErrors.Load(),
	}
}

// relistenLocked listens on the path again after Drop. On failure it logs, counts, and leaves
// the link dropped. l.mu must be held.
// enterLocked moves a live link to state with the given latency, listening
// again first if it was dropped. It returns the state it left, and false
// (nothing changed) when the socket cannot be listened on again.
func (l *Link) enterLocked(state string, latency, jitter time.Duration) (string, bool) {
	prev := l.state
	if prev == LinkDropped && !l.relistenLocked() {
		return prev, false
	}
	l.state = state
	l.latency, l.jitter = latency, jitter
	l.bumpLocked()
	return prev, true
}

// releaseHeldAndUnlock resets the connections Blackhole swallowed, after
// releasing mu, and returns how many there were.
func (l *Link) releaseHeldAndUnlock() int {
	held := l.takeConnsLocked(func(c *linkConn) bool { return c.held })
	l.mu.Unlock()
	for _, c := range held {
		_ = c.Close()
	}
	return len(held)
}

func (l *Link) relistenLocked() bool {
	if err := l.removeStaleLocked(); err != nil {
		l.healFailures.Add(1)
		l.log.Error("link: cannot listen again; still dropped", "path", l.path, "err", err)
		return false
	}
	ln, err := listenUnix(l.path)
	if err != nil {
		l.healFailures.Add(1)
		l.log.Error("link: cannot listen again; still dropped", "path", l.path, "err", err)
		return false
	}
	l.ln = ln
	l.wg.Add(1)
	go l.serve(ln)
	return true
}

// removeStaleLocked removes the socket file Drop left behind, if it is still that file.
func (l *Link) removeStaleLocked() error {
	if l.stale == nil {
		return nil
	}
	stale := l.stale
	l.stale = nil
	fi, err := os.Lstat(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("link %s: inspect the socket left by Drop: %w", l.path, err)
	}
	if !os.SameFile(fi, stale) {
		return fmt.Errorf("link %s: the socket left by Drop was replaced by someone else; not removing it", l.path)
	}
	if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("link %s: remove the socket left by Drop: %w", l.path, err)
	}
	return nil
}

// takeConnsLocked removes the conns that match from tracking and returns them, to be closed
// after l.mu is released (linkConn.Close takes l.mu).
func (l *Link) takeConnsLocked(match func(*linkConn) bool) []*linkConn {
	var out []*linkConn
	for c := range l.conns {
		if match(c) {
			delete(l.conns, c)
			if c.holdTimer != nil {
				c.holdTimer.Stop()
			}
			out = append(out, c)
		}
	}
	return out
}

// bumpLocked wakes everything waiting on the current state (delayed writes).
func (l *Link) bumpLocked() {
	close(l.changed)
	l.changed = make(chan struct{})
}

// linkConn is a connection the link accepted; the link tracks it until it is closed.
type linkConn struct {
	net.Conn
	link *Link
	done chan struct{} // closed by Close

	once sync.Once
	err  error

	// Guarded by link.mu.
	held      bool
	holdTimer *time.Timer
}

// Read reads what the client sent; while the connection is swallowed, it discards it and
// keeps reading, so the server sees nothing more until the connection is closed.
func (c *linkConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if n > 0 && c.isHeld() {
			if err != nil {
				return 0, err
			}
			continue // bounded: a swallowed connection is closed after HoldMax at most
		}
		return n, err
	}
}

// Write sends the server's bytes: swallowed while blackholed, delayed under latency.
func (c *linkConn) Write(p []byte) (int, error) {
	l := c.link
	for {
		l.mu.Lock()
		if c.held {
			l.mu.Unlock()
			return len(p), nil // the network ate it
		}
		if l.state == LinkDropped || l.state == LinkClosed {
			// Drop or Close is resetting this connection (it closes conns after releasing
			// l.mu): nothing may get through meanwhile, least of all a delayed write.
			l.mu.Unlock()
			_ = c.Close()
			return 0, &net.OpError{Op: "write", Net: "unix", Addr: l.Addr(), Err: net.ErrClosed}
		}
		if l.state != LinkLatency || len(p) == 0 {
			l.mu.Unlock()
			return c.Conn.Write(p)
		}
		delay := l.latency
		if l.jitter > 0 {
			delay += time.Duration(l.rnd.Int64N(int64(l.jitter)))
		}
		changed := l.changed
		l.delayed.Add(1)
		l.delayTotal.Add(int64(delay))
		l.mu.Unlock()

		t := time.NewTimer(delay)
		select {
		case <-t.C:
			l.mu.Lock()
			held := c.held
			l.mu.Unlock()
			if held {
				return len(p), nil
			}
			return c.Conn.Write(p)
		case <-changed: // the fault changed (Heal, another fault): decide again
			t.Stop()
		case <-c.done:
			t.Stop()
			return c.Conn.Write(p) // closed: the underlying conn reports it
		}
	}
}

func (c *linkConn) isHeld() bool {
	c.link.mu.Lock()
	defer c.link.mu.Unlock()
	return c.held
}

// Close closes the connection and stops tracking it. Idempotent.
func (c *linkConn) Close() error {
	c.once.Do(func() {
		l := c.link
		l.mu.Lock()
		delete(l.conns, c)
		if c.holdTimer != nil {
			c.holdTimer.Stop()
		}
		l.mu.Unlock()
		close(c.done)
		c.err = c.Conn.Close()
	})
	return c.err
}
