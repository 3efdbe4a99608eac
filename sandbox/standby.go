package sandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The standby handover, which every backend's standbys share with the init
// (sandbox/initproc): the backend makes a directory of the standby's own
// in the gateway's socket dir (NewStandbyDir) and names it, as seen inside
// the sandbox, in EnvStandby; the init waits for HandoverFile to appear
// there (WriteHandover), reads it (ReadHandover), and starts the agent
// with the environment it carries.
const (
	// EnvStandby names the directory the init of a standby waits in. The
	// init removes it from the agent's environment.
	EnvStandby = "OVERNIGHT_STANDBY"
	// HandoverFile is the file, in that directory, the handover is.
	HandoverFile = "handover.json"
)

// Handover is what an attempt hands the standby it takes over.
type Handover struct {
	// Attempt is the attempt taking the standby over: the one its spec
	// was started for.
	Attempt int `json:"attempt"`
	// Env is set in the agent's environment on top of what the standby
	// was started with (a variable of both takes this value): the
	// attempt's token, its number, whatever else differs per attempt. The
	// attempt's whole environment may be given.
	Env map[string]string `json:"env"`
}

// NewStandbyDir makes a directory for one standby's handover in socketDir
// (the run's gateway socket dir, mounted at GatewayDir): its host path, and
// its path inside the sandbox. Its name is random, and socketDir cannot be
// listed by the sandbox's user (NewSocketDir), so another sandbox of the
// run cannot find it; it is mode 0755 so that the init, as the sandbox's
// user, can read it and watch it for the handover.
func NewStandbyDir(socketDir string) (host, inside string, err error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("name a standby dir: %w", err)
	}
	name := "standby-" + hex.EncodeToString(b)
	host = filepath.Join(socketDir, name)
	if err := os.Mkdir(host, 0o755); err != nil {
		return "", "", fmt.Errorf("make standby dir in %s: %w", socketDir, err)
	}
	// Mkdir applies the umask.
	if err := os.Chmod(host, 0o755); err != nil {
		return "", "", errors.Join(fmt.Errorf("make standby dir %s readable: %w", host, err), os.RemoveAll(host))
	}
	return host, GatewayDir + "/" + name, nil
}

// WriteHandover delivers h into the standby dir at host (NewStandbyDir)
// at once: written aside, then renamed into place, so the init never reads
// half of it. A second handover is refused with ErrInvalidSpec.
func WriteHandover(host string, h Handover) error {
	for k := range h.Env {
		if k == "" || strings.ContainsAny(k, "=\x00") {
			return fmt.Errorf("hand over to the standby in %s: %w: environment variable name %q", host, ErrInvalidSpec, k)
		}
	}
	dst := filepath.Join(host, HandoverFile)
	if _, err := os.Lstat(dst); err == nil {
		return fmt.Errorf("hand over to the standby in %s: %w: it was handed over already", host, ErrInvalidSpec)
	}
	b, err := json.Marshal(h)
	if err != nil {
		return fmt.Errorf("hand over to the standby in %s: %w", host, err)
	}
	tmp := filepath.Join(host, "."+HandoverFile)
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return fmt.Errorf("hand over to the standby in %s: %w", host, err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil { // WriteFile applies the umask
		return fmt.Errorf("hand over to the standby in %s: %w", host, err)
	}
	if err := os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("hand over to the standby in %s: %w", host, err)
	}
	return nil
}

// ReadHandover reads the handover in dir; an error wrapping os.ErrNotExist
// while there is none yet.
func ReadHandover(dir string) (Handover, error) {
	b, err := os.ReadFile(filepath.Join(dir, HandoverFile))
	if err != nil {
		return Handover{}, err
	}
	var h Handover
	if err := json.Unmarshal(b, &h); err != nil {
		return Handover{}, fmt.Errorf("read the handover in %s: %w", dir, err)
	}
	return h, nil
}
