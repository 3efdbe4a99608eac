package httpworld_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
)

// kvServer is a small key-value HTTP API for the specs, an upstream with
// the failure modes they need: it counts every write per key (as etcd's
// version does), checks a bearer credential, and can be told how to
// answer the next write.
type kvServer struct {
	*httptest.Server
	token string

	mu       sync.Mutex
	versions map[string]int
	next     string        // how to answer the next put: "", "5xx-after", "5xx-before", "429", "slow", "garbage", "huge"
	slow     time.Duration // how long "slow" takes
	auths    []string      // the Authorization header of every request
	puts     int
}

func newKV(token string) *kvServer {
	s := &kvServer{token: token, versions: map[string]int{}, slow: 2 * time.Second}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /kv/put", s.put)
	mux.HandleFunc("POST /kv/get", s.get)
	mux.HandleFunc("GET /kv/get", s.getQuery)
	s.Server = httptest.NewServer(s.checkAuth(mux))
	DeferCleanup(s.Close)
	return s
}

func (s *kvServer) checkAuth(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.auths = append(s.auths, r.Header.Get("Authorization"))
		s.mu.Unlock()
		if s.token != "" && r.Header.Get("Authorization") != "Bearer "+s.token {
			http.Error(w, `{"error":"bad credential"}`, http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	})
}

func (s *kvServer) answerNext(how string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.next = how
}

func (s *kvServer) version(key string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.versions[key]
}

func (s *kvServer) put(w http.ResponseWriter, r *http.Request) {
	var req struct{ Key, Value string }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil || req.Key == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"error":"want {key, value}"}`))
		return
	}
	s.mu.Lock()
	how := s.next
	s.next = ""
	s.puts++
	if how != "5xx-before" && how != "429" {
		s.versions[req.Key]++
	}
	v := s.versions[req.Key]
	s.mu.Unlock()
	switch how {
	case "5xx-after", "5xx-before":
		http.Error(w, "backend unavailable", http.StatusServiceUnavailable)
		return
	case "429":
		w.Header().Set("Retry-After", "7")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = w.Write([]byte(`{"error":"slow down"}`))
		return
	case "slow":
		time.Sleep(s.slow)
	case "garbage":
		conn, buf, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_, _ = buf.WriteString("this is not HTTP at all\r\n\r\n")
			_ = buf.Flush()
			_ = conn.Close()
		}
		return
	case "text":
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("stored, version " + itoa(v)))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"key": req.Key, "version": itoa(v)})
}

func (s *kvServer) get(w http.ResponseWriter, r *http.Request) {
	var req struct{ Key string }
	_ = json.NewDecoder(r.Body).Decode(&req)
	s.answerGet(w, req.Key)
}

func (s *kvServer) getQuery(w http.ResponseWriter, r *http.Request) {
	s.answerGet(w, r.URL.Query().Get("key"))
}

func (s *kvServer) answerGet(w http.ResponseWriter, key string) {
	v := s.version(key)
	w.Header().Set("Content-Type", "application/json")
	if v == 0 {
		_ = json.NewEncoder(w).Encode(map[string]any{"count": "0"})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"count": "1", "version": itoa(v)})
}

func itoa(n int) string { return strconv.Itoa(n) }

// seen are the Authorization headers of every request so far, and the puts.
func (s *kvServer) seen() ([]string, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...), s.puts
}
