package writeup_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestWriteup(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Writeup Suite")
}
