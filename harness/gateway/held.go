package gateway

import (
	"bufio"
	"net"
	"net/http"
	"sync"
)

// heldWriter calls hold once, before the first byte of a reply leaves: a
// header, a body, a flush of a stream, or a hijacked connection's reset.
type heldWriter struct {
	http.ResponseWriter
	hold func()
	once sync.Once
}

func (w *heldWriter) wait() { w.once.Do(w.hold) }

func (w *heldWriter) WriteHeader(status int) {
	w.wait()
	w.ResponseWriter.WriteHeader(status)
}

func (w *heldWriter) Write(b []byte) (int, error) {
	w.wait()
	return w.ResponseWriter.Write(b)
}

// Flush implements http.Flusher.
func (w *heldWriter) Flush() {
	w.wait()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// FlushError is what http.ResponseController.Flush calls: it reports a
// failed flush (a stream whose reader went away).
func (w *heldWriter) FlushError() error {
	w.wait()
	return http.NewResponseController(w.ResponseWriter).Flush()
}

// Hijack implements http.Hijacker.
func (w *heldWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	w.wait()
	return http.NewResponseController(w.ResponseWriter).Hijack()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *heldWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
