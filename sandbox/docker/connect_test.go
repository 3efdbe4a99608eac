package docker_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/sandbox"
	"github.com/overnight-dev/overnight/sandbox/docker"
)

var _ = Describe("Connect", func() {
	It("fails fast with ErrEngineUnreachable when no engine listens at DOCKER_HOST", func(ctx SpecContext) {
		host := "unix:///tmp/ovn-nonexistent-" + suiteID + ".sock"
		GinkgoT().Setenv("DOCKER_HOST", host)
		began := time.Now()
		c, err := docker.Connect(ctx)
		Expect(c).To(BeNil())
		Expect(err).To(MatchError(docker.ErrEngineUnreachable))
		Expect(time.Since(began)).To(BeNumerically("<", 2*time.Second))
		Expect(err.Error()).To(HavePrefix("cannot reach the Docker engine at " + host + ": "))
		Expect(err.Error()).To(ContainSubstring("is dockerd running? (DOCKER_HOST=\"" + host + "\")"))
		Expect(err).To(MatchError(sandbox.ErrUnavailable), "the contract's sentinel, whatever the backend")
	})
})
