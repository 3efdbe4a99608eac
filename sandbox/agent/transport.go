package agent

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// socketTransport is the HTTP/1.1 round tripper of a Client on the
// gateway's unix socket. It keeps a few connections alive, like
// http.Transport, but sends a request and reads its reply in the caller's
// goroutine: http.Transport runs a reader and a writer goroutine per
// connection and hands every request and reply between them and the
// caller, which costs an agent that makes one call after another more than
// the call itself on a loaded machine. The bytes on the wire are the same.
//
// What it does not do, the gateway never asks for: no proxies, no TLS, no
// compression, no 100-continue, no HTTP/2.
type socketTransport struct {
	path        string
	maxIdle     int           // idle connections kept
	idleTimeout time.Duration // an idle connection older than this is closed

	mu   sync.Mutex
	idle []*socketConn // most recently used last
}

// socketConn is one keep-alive connection.
type socketConn struct {
	net.Conn
	br        *bufio.Reader
	bw        *bufio.Writer
	idleSince time.Time
}

// RoundTrip implements http.RoundTripper.
func (t *socketTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	for {
		c, reused, err := t.conn(ctx)
		if err != nil {
			if req.Body != nil {
				_ = req.Body.Close()
			}
			return nil, err
		}
		resp, err := t.exchange(ctx, c, req)
		if err == nil {
			return resp, nil
		}
		var nr *noReplyError
		if !errors.As(err, &nr) {
			return nil, err
		}
		// A kept connection the gateway has closed since (a harness that died
		// and came back) fails the write at once: on a unix socket, a write to
		// a closed peer is refused whole, so the request never left, and it is
		// sent again on a new connection, whatever it is. One that failed
		// later, before any of the reply came back, is sent again only if
		// sending it twice is harmless, as http.Transport does.
		if !reused || ctx.Err() != nil || !(nr.unsent || replayable(req)) {
			return nil, nr.err
		}
		if req, err = rewound(req); err != nil {
			return nil, nr.err
		}
	}
}

// replayable: a request with no body and an idempotent method.
func replayable(req *http.Request) bool {
	return (req.Body == nil || req.Body == http.NoBody) && (req.Method == http.MethodGet || req.Method == http.MethodHead)
}

// rewound is req with its body from the start again.
func rewound(req *http.Request) (*http.Request, error) {
	if req.Body == nil || req.Body == http.NoBody {
		return req, nil
	}
	if req.GetBody == nil {
		return nil, errors.New("the request body cannot be read again")
	}
	body, err := req.GetBody()
	if err != nil {
		return nil, err
	}
	again := req.Clone(req.Context())
	again.Body = body
	return again, nil
}

// noReplyError is a failure before any byte of the reply was read; unsent
// says the request's write failed.
type noReplyError struct {
	err    error
	unsent bool
}

func (e *noReplyError) Error() string { return e.err.Error() }
func (e *noReplyError) Unwrap() error { return e.err }

// conn returns a kept connection, or a new one.
func (t *socketTransport) conn(ctx context.Context) (*socketConn, bool, error) {
	for {
		t.mu.Lock()
		n := len(t.idle)
		if n == 0 {
			t.mu.Unlock()
			break
		}
		c := t.idle[n-1]
		t.idle = t.idle[:n-1]
		t.mu.Unlock()
		if time.Since(c.idleSince) > t.idleTimeout {
			_ = c.Close()
			continue
		}
		return c, true, nil
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "unix", t.path)
	if err != nil {
		return nil, false, err // a *net.OpError with Op "dial": the request never left
	}
	return &socketConn{Conn: nc, br: bufio.NewReaderSize(nc, 4<<10), bw: bufio.NewWriterSize(nc, 4<<10)}, false, nil
}

// exchange writes req on c and reads the reply's head; the body is read
// by the caller, and c goes back to the idle list once it is read whole.
func (t *socketTransport) exchange(ctx context.Context, c *socketConn, req *http.Request) (*http.Response, error) {
	// A cancelled context unblocks the connection at once; it is closed then.
	stop := func() bool { return true }
	if ctx.Done() != nil {
		stop = context.AfterFunc(ctx, func() { _ = c.SetDeadline(time.Unix(1, 0)) })
	}
	fail := func(err error) error {
		stop()
		_ = c.Close()
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return err
	}
	werr := req.Write(c.bw)
	if werr == nil {
		werr = c.bw.Flush()
	}
	if werr != nil {
		// The gateway may have answered and closed before reading all of
		// the request (413 for a body over its limit): that answer is the
		// reply, as with http.Transport.
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		if resp, err := http.ReadResponse(c.br, req); err == nil {
			resp.Close = true
			resp.Body = &replyBody{ReadCloser: resp.Body, t: t, c: c, stop: stop, reuse: false}
			return resp, nil
		}
		return nil, fail(&noReplyError{err: werr, unsent: true})
	}
	if _, err := c.br.Peek(1); err != nil {
		return nil, fail(&noReplyError{err: err})
	}
	resp, err := http.ReadResponse(c.br, req)
	if err != nil {
		return nil, fail(err)
	}
	resp.Body = &replyBody{ReadCloser: resp.Body, t: t, c: c, stop: stop, reuse: !resp.Close && !req.Close}
	return resp, nil
}

// replyBody gives the connection back once the reply is read to its end
// and closed, or closes it if the reply is abandoned before its end.
type replyBody struct {
	io.ReadCloser
	t     *socketTransport
	c     *socketConn
	stop  func() bool
	reuse bool
	eof   bool
	done  bool
}

func (b *replyBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if errors.Is(err, io.EOF) {
		b.eof = true
	} else if err != nil {
		b.reuse = false
	}
	return n, err
}

func (b *replyBody) Close() error {
	if b.done {
		return nil
	}
	b.done = true
	err := b.ReadCloser.Close()
	// stop reports false once the context's cancellation has run: the
	// connection's deadline was moved and it cannot be trusted.
	if b.stop() && b.reuse && b.eof && err == nil && b.c.br.Buffered() == 0 {
		b.t.putIdle(b.c)
		return nil
	}
	_ = b.c.Close()
	return err
}

func (t *socketTransport) putIdle(c *socketConn) {
	c.idleSince = time.Now()
	t.mu.Lock()
	if len(t.idle) < t.maxIdle {
		t.idle = append(t.idle, c)
		c = nil
	}
	t.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// CloseIdleConnections closes the idle connections (http.Client calls it).
func (t *socketTransport) CloseIdleConnections() {
	t.mu.Lock()
	idle := t.idle
	t.idle = nil
	t.mu.Unlock()
	for _, c := range idle {
		_ = c.Close()
	}
}
