package journal_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/journal"
)

// crashSeedEnv overrides the seed (default: Ginkgo's random seed, --seed).
const crashSeedEnv = "OVERNIGHT_JOURNAL_CRASH_SEED"

var _ = Describe("crash durability", func() {
	It("keeps every acknowledged commit, whole, across SIGKILLs at random points", func() {
		seed := GinkgoRandomSeed()
		if s := os.Getenv(crashSeedEnv); s != "" {
			var err error
			seed, err = strconv.ParseInt(s, 10, 64)
			Expect(err).NotTo(HaveOccurred(), crashSeedEnv)
		}
		rng := rand.New(rand.NewPCG(uint64(seed), 0x6a6f75726e616c))
		AddReportEntry("crash seed", seed)
		fmt.Fprintf(GinkgoWriter, "crash seed %d (rerun with %s=%d)\n", seed, crashSeedEnv, seed)

		dir := filepath.Join(GinkgoT().TempDir(), "state")
		type ackedRequest struct{ iter, w, i int }
		var acked []ackedRequest
		const iterations = 32
		deadline := time.Now().Add(3 * time.Minute) // generous: CI machines are slow and shared
		ran := 0
		for iter := 0; iter < iterations && time.Now().Before(deadline); iter++ {
			ran++
			p := startHelper("crash", dir, fmt.Sprintf("%s=%d", helperIterEnv, iter))
			var lines []string
			// Most kills land while the writers run; some while the child is
			// still starting or opening the journal (Badger creates files
			// there: see setAsideEmptyLogs).
			afterReady := rng.IntN(4) != 0
			delay := time.Duration(rng.IntN(80_000)) * time.Microsecond
			if afterReady {
				Expect(p.waitLine(30*time.Second)).To(Equal("ready"), "stderr: %s", p.stderr)
				delay = time.Duration(rng.IntN(200_000)) * time.Microsecond
			}
			time.Sleep(delay)
			lines = append(lines, p.killAndCollect()...)

			got := 0
			for _, line := range lines {
				var w, i int
				if line == "ready" {
					continue
				}
				// Each line is one write(2) below PIPE_BUF, so it arrives whole.
				_, err := fmt.Sscanf(line, "ack %d %d", &w, &i)
				Expect(err).NotTo(HaveOccurred(), "line %q", line)
				acked = append(acked, ackedRequest{iter, w, i})
				got++
			}
			fmt.Fprintf(GinkgoWriter, "iteration %d: SIGKILL %s after %s: %d acknowledged commits\n",
				iter, map[bool]string{true: "ready", false: "start"}[afterReady], delay, got)

			// Reopen and check the whole history so far.
			j, err := journal.Open(dir, journal.Options{})
			Expect(err).NotTo(HaveOccurred(), "reopen after kill %d (seed %d)", iter, seed)
			for _, a := range acked {
				prefix, entries := crashRequest(a.iter, a.w, a.i)
				for _, e := range entries {
					v, err := j.Get(e.Key)
					Expect(err).NotTo(HaveOccurred(), "acknowledged %s lost after kill %d (seed %d)", prefix, iter, seed)
					Expect(v).To(Equal(e.Value), "key %s", e.Key)
				}
			}
			parts := map[string]int{}
			Expect(j.Scan([]byte("crash/"), func(k, v []byte) error {
				key := string(k)
				Expect(v).To(Equal(crashValue(key)), "key %s", key)
				parts[key[:strings.LastIndexByte(key, '/')+1]]++
				return nil
			})).To(Succeed())
			for prefix, n := range parts {
				var it, w, i int
				_, err := fmt.Sscanf(prefix, "crash/%03d/%02d/%08d/", &it, &w, &i)
				Expect(err).NotTo(HaveOccurred(), prefix)
				Expect(n).To(Equal(crashParts(i)), "half a commit survived: %s (seed %d)", prefix, seed)
			}
			Expect(j.Close()).To(Succeed())
		}
		fmt.Fprintf(GinkgoWriter, "%d kills, %d acknowledged commits checked (seed %d)\n", ran, len(acked), seed)
		Expect(ran).To(BeNumerically(">=", 20), "too few iterations ran before the deadline")
		Expect(len(acked)).To(BeNumerically(">", 100), "the writers barely ran: the test proved little")
	})
})
