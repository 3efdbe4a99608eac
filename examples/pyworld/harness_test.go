package pyworld_test

import (
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	ot "github.com/overnight-dev/overnight/harness/overnighttest"
	"github.com/overnight-dev/overnight/scenarios"
)

// These specs run scenario.yaml through the real harness, as
// `overnight run examples/pyworld/scenario.yaml` does: the harness starts
// inventory.py for each run as a command world, the agent runs in a Docker
// sandbox, and the checkers ask the Python world.
var _ = Describe("scenario.yaml through the harness", Ordered, func() {
	var scen func() *scenarios.Scenario
	BeforeAll(func(ctx SpecContext) {
		python3()
		ot.BuildInitBinary(ctx, GinkgoT())
		agent := buildAgent(ctx)
		raw, err := os.ReadFile("scenario.yaml")
		Expect(err).NotTo(HaveOccurred())
		text := strings.ReplaceAll(string(raw), "./bin/inventory-agent", agent)
		here, err := filepath.Abs("scenario.yaml")
		Expect(err).NotTo(HaveOccurred())
		scen = func() *scenarios.Scenario {
			// Parsed as the file beside inventory.py, so the command runs there.
			s, err := scenarios.Parse(here, []byte(text))
			Expect(err).NotTo(HaveOccurred())
			return s
		}
	}, NodeTimeout(3*time.Minute))

	It("passes: the agent killed after the world executed its third effect resumes, and nothing is done twice", func(ctx SpecContext) {
		res, err := ot.Run(ctx, scen(), ot.Progress(GinkgoWriter))
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(ot.Pass())
		Expect(res).To(ot.SurviveFaults())
		Expect(res.Attempts).To(Equal(2))
		Expect(res.Effects.Duplicates).To(BeZero())
	}, SpecTimeout(3*time.Minute))

	It("catches the naive variant: the Python world shows every item and reservation made twice", func(ctx SpecContext) {
		res, err := ot.Run(ctx, scen(), ot.Agent("naive"))
		Expect(err).NotTo(HaveOccurred())
		Expect(res).NotTo(ot.Pass())
		Expect(res).NotTo(ot.HoldInvariant("no-duplicate-effects"))
		Expect(res.Effects.Duplicates).To(Equal(3))
	}, SpecTimeout(3*time.Minute))

	It("passes when the world's API moves to v2 mid-run: the agent corrects its requests from the world's error", func(ctx SpecContext) {
		res, err := ot.Run(ctx, scen(), ot.Faults("api-version:v2@step:2"))
		Expect(err).NotTo(HaveOccurred())
		Expect(res).To(ot.Pass())
		Expect(res).To(ot.SurviveFaults())
	}, SpecTimeout(3*time.Minute))
})
