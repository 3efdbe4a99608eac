package overnighttest_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestOvernighttest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Overnighttest Suite")
}
