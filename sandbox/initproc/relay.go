package initproc

import (
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// Relay copies TCP connections byte for byte to a unix socket, one socket connection per
// accepted connection. It understands nothing of what it carries.
type Relay struct {
	// Socket is the unix socket every connection is relayed to. Empty means no gateway:
	// every accepted connection is closed at once.
	Socket string
	// DialTimeout bounds the dial of Socket for one connection (default 5s).
	DialTimeout time.Duration

	warnOnce sync.Once
}

// Serve accepts connections on ln until ln is closed, relaying each in its own goroutine.
// It returns the error that ended the accept loop (net.ErrClosed after ln.Close).
func (r *Relay) Serve(ln net.Listener) error {
	var backoff time.Duration
	for {
		c, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return err
			}
			// Out of file descriptors and the like: wait and retry rather than end the relay,
			// which would cut the agent off from the gateway for good.
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			time.Sleep(backoff)
			continue
		}
		backoff = 0
		go r.handle(c)
	}
}

func (r *Relay) handle(c net.Conn) {
	if r.Socket == "" {
		r.warnOnce.Do(func() { errorf("%s is not set; closing gateway connections", EnvSocket) })
		c.Close()
		return
	}
	timeout := r.DialTimeout
	if timeout <= 0 {
		timeout = dialTimeout
	}
	u, err := net.DialTimeout("unix", r.Socket, timeout)
	if err != nil {
		// The client sees the connection close: to an HTTP client, a retryable transport error.
		c.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { defer wg.Done(); pipe(u, c) }()
	go func() { defer wg.Done(); pipe(c, u) }()
	wg.Wait()
	c.Close()
	u.Close()
}

// pipe copies src to dst. A clean end of src is passed on as a half-close of dst, so a peer
// that shuts down its writing side still reads the whole answer; a broken copy tears down both
// connections, which also unblocks the copy in the other direction.
func pipe(dst, src net.Conn) {
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		src.Close()
		return
	}
	if cw, ok := dst.(interface{ CloseWrite() error }); ok {
		if cw.CloseWrite() == nil {
			return
		}
	}
	dst.Close()
	src.Close()
}
