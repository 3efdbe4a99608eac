package walsync_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestWALSync(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "WAL sync Suite")
}
