package writeup_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/overnight-dev/overnight/harness/history"
	"github.com/overnight-dev/overnight/harness/writeup"
)

// The sections of a run with reflections are pinned by the golden files
// of the reports that carry them (harness/report, reflect); these are the
// cases those do not show.
var _ = Describe("a run's reflections written up", func() {
	It("says so, in Markdown and HTML, when the run opened no reflection and nothing met the gate", func() {
		md := writeup.ReflectionsMarkdown(nil, nil)
		Expect(md).To(Equal("The run opened no reflection.\n\n## The gate\n\nNo effect waited at the gate or was denied by it.\n"))
		html, err := writeup.ReflectionsHTML(nil, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(html)).To(Equal("<p>The run opened no reflection.</p>\n\n<h2>The gate</h2>\n<p>No effect waited at the gate or was denied by it.</p>"))
	})

	It("says where a reflection stands in a few words: verified, gave up, or the stage it has reached while it decides", func() {
		Expect(writeup.DecisionText(history.ReflectionRecord{Decision: history.DecisionVerify})).To(Equal("verified"))
		Expect(writeup.DecisionText(history.ReflectionRecord{Decision: history.DecisionGaveUp})).To(Equal("gave up"))
		Expect(writeup.DecisionText(history.ReflectionRecord{Stage: history.StageReplayed})).To(Equal("deciding (stage replayed)"))
	})
})
