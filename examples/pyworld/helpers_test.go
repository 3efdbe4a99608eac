package pyworld_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

// readyTimeout bounds the wait for the world's "serving" line (Python
// behind a version manager's shim can take a second to start).
const readyTimeout = 15 * time.Second

// servingPrefix starts the one line the world prints on stdout once it listens.
const servingPrefix = "serving world inventory on "

// pyWorld is inventory.py running as a real process.
type pyWorld struct {
	URL    string
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *syncBuffer
}

// syncBuffer is a bytes.Buffer safe for the process's writer and a reader.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

var (
	pythonOnce sync.Once
	pythonPath string
	pythonErr  error
)

// python3 returns the interpreter that `python3` on PATH runs, or skips the
// spec saying why. It asks the interpreter for its own path once, so a
// version manager's shim (pyenv's takes half a second) is not paid for on
// every start.
func python3() string {
	pythonOnce.Do(func() {
		var p string
		p, pythonErr = exec.LookPath("python3")
		if pythonErr != nil {
			return
		}
		out, err := exec.Command(p, "-c", "import sys; print(sys.executable)").Output()
		pythonPath = strings.TrimSpace(string(out))
		if err != nil || pythonPath == "" {
			pythonPath = p
		}
	})
	if pythonErr != nil {
		Skip("python3 is not on PATH: the inventory world is a Python 3 program (" + pythonErr.Error() + ")")
	}
	return pythonPath
}

// startWorld starts `python3 inventory.py` with args and env added to this
// process's environment (OVERNIGHT_WORLD_* cleared first), waits for its
// serving line, and registers its SIGKILL for the end of the spec.
func startWorld(env []string, args ...string) *pyWorld {
	GinkgoHelper()
	cmd := exec.Command(python3(), append([]string{"inventory.py"}, args...)...)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OVERNIGHT_WORLD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	w := &pyWorld{cmd: cmd, exited: make(chan struct{}), stderr: &syncBuffer{}}
	cmd.Stderr = io.MultiWriter(w.stderr, GinkgoWriter)
	stdout, err := cmd.StdoutPipe()
	Expect(err).NotTo(HaveOccurred())
	Expect(cmd.Start()).To(Succeed(), "start python3 inventory.py")
	go func() {
		_ = cmd.Wait()
		close(w.exited)
	}()
	DeferCleanup(w.kill)

	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		if sc.Scan() {
			lines <- sc.Text()
		}
		_, _ = io.Copy(GinkgoWriter, stdout)
	}()
	select {
	case line := <-lines:
		Expect(line).To(HavePrefix(servingPrefix), "the world's first line on stdout")
		w.URL = strings.TrimPrefix(line, servingPrefix)
	case <-w.exited:
		Fail(fmt.Sprintf("inventory.py exited before it served; stderr:\n%s", w.stderr))
	case <-time.After(readyTimeout):
		Fail(fmt.Sprintf("inventory.py printed no serving line in %s; stderr:\n%s", readyTimeout, w.stderr))
	}
	return w
}

// kill SIGKILLs the world and waits (bounded) for it to be gone.
func (w *pyWorld) kill() {
	_ = w.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-w.exited:
	case <-time.After(10 * time.Second):
		Fail("inventory.py did not exit within 10s of SIGKILL")
	}
}

var httpClient = &http.Client{Timeout: 10 * time.Second}

// do sends body (a value, or a string sent as it is) to the world's call
// path and returns the status and the answer.
func (w *pyWorld) do(path string, body any) (int, []byte) {
	GinkgoHelper()
	var payload []byte
	if s, ok := body.(string); ok {
		payload = []byte(s)
	} else {
		var err error
		payload, err = json.Marshal(body)
		Expect(err).NotTo(HaveOccurred())
	}
	resp, err := httpClient.Post(w.URL+path, "application/json", bytes.NewReader(payload))
	Expect(err).NotTo(HaveOccurred(), "POST %s", path)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.Header.Get("Content-Type")).To(Equal("application/json"), "POST %s answers JSON", path)
	return resp.StatusCode, data
}

// post sends body to path and decodes the answer, whatever its status,
// into out; it returns the status.
func (w *pyWorld) post(path string, body, out any) int {
	GinkgoHelper()
	status, data := w.do(path, body)
	decodeStrict(data, out, "POST %s answered %d %s", path, status, data)
	return status
}

// must sends body to path, expects 200 and decodes the answer into out
// (if not nil).
func (w *pyWorld) must(path string, body, out any) {
	GinkgoHelper()
	status, data := w.do(path, body)
	Expect(status).To(Equal(http.StatusOK), "POST %s answered %s", path, data)
	if out != nil {
		decodeStrict(data, out, "POST %s answered %s", path, data)
	}
}

// decodeStrict decodes data into out, failing on a field the Go wire
// types do not know: the check that the Python answers fit them.
func decodeStrict(data []byte, out any, explain ...any) {
	GinkgoHelper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	Expect(dec.Decode(out)).To(Succeed(), explain...)
}
