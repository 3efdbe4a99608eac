package mcpworld_test

import (
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

func TestMCPWorld(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "MCP server worlds")
}
