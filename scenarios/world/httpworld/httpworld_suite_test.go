package httpworld_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestHTTPWorld(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "HTTP API worlds")
}
