package pyworld_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestPyWorld(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "The inventory world in Python")
}
