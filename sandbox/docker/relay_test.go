package docker_test

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

var _ = Describe("the gateway relay, end to end", func() {
	It("brings the agent's HTTP calls on 127.0.0.1:7070 to the host's unix socket, keep-alive included", func(ctx SpecContext) {
		var mu sync.Mutex
		var seen []string
		gw := startGateway(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("Authorization"))
			mu.Unlock()
			fmt.Fprintf(w, `{"path":%q}`, r.URL.Path)
		}))
		spec := agentSpec("gateway-call", "/v1/run", "/v1/clock", "/v1/checkpoint")
		spec.SocketDir = gw.dir
		spec.Env["OVERNIGHT_TOKEN"] = "tok-123"
		code, out, errOut := runToEnd(ctx, newEngine(), spec)
		Expect(code).To(Equal(0), out+errOut)
		Expect(out).To(Equal(`200 {"path":"/v1/run"}` + "\n" + `200 {"path":"/v1/clock"}` + "\n" + `200 {"path":"/v1/checkpoint"}` + "\n"))
		mu.Lock()
		defer mu.Unlock()
		Expect(seen).To(Equal([]string{
			"GET /v1/run Bearer tok-123", "GET /v1/clock Bearer tok-123", "GET /v1/checkpoint Bearer tok-123",
		}))
		Expect(gw.conns.Load()).To(Equal(int32(1)), "three keep-alive calls over one relayed connection")
	})

	It("carries a 1 MiB request body and a 1 MiB response intact", func(ctx SpecContext) {
		const size = 1 << 20
		rng := rand.New(rand.NewPCG(7, 7))
		reply := make([]byte, size)
		for i := range reply {
			reply[i] = byte(rng.Uint32())
		}
		received := make(chan string, 1)
		gw := startGateway(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			received <- fmt.Sprintf("%d %s", len(body), digest(body))
			_, _ = w.Write(reply)
		}))
		spec := agentSpec("gateway-post", "/v1/effects", fmt.Sprint(size))
		spec.SocketDir = gw.dir
		code, out, errOut := runToEnd(ctx, newEngine(), spec)
		Expect(code).To(Equal(0), out+errOut)
		fields := map[string]string{} // status=200 sent=<sha256> received=<sha256> received_len=N
		for _, kv := range strings.Fields(out) {
			k, v, _ := strings.Cut(kv, "=")
			fields[k] = v
		}

		var got string
		Eventually(received).Should(Receive(&got))
		Expect(got).To(Equal(fmt.Sprintf("%d %s", size, fields["sent"])), "the gateway got exactly what the agent sent")
		Expect(fields).To(HaveKeyWithValue("status", "200"))
		Expect(fields).To(HaveKeyWithValue("received", digest(reply)), "the agent got exactly what the gateway sent")
		Expect(fields).To(HaveKeyWithValue("received_len", fmt.Sprint(size)))
	})

	It("closes the agent's connection when no gateway listens", func(ctx SpecContext) {
		dir := GinkgoT().TempDir() // an empty socket dir: nothing listens there
		spec := agentSpec("gateway-call", "/v1/run")
		spec.SocketDir = dir
		code, out, _ := runToEnd(ctx, newEngine(), spec)
		Expect(code).To(Equal(1))
		Expect(out).To(HavePrefix("error: "))
	})
})
