// Package report renders what overnight ran for the people and the CI
// systems that read it: a suite's result as JUnit XML (testsuite per
// scenario and agent, testcase per seed, failure with the reason and the
// reproducing command, skipped for unknown), as JSON, as a Markdown
// summary fit for a CI step summary and as a self-contained HTML page; and
// a run's history (history.Full) as a self-contained HTML page with its
// SVG timeline, as Markdown, and as its result's JSON. Its HTML pages are
// written in harness/writeup's page shell, with the one stylesheet every
// overnight page shares, and need nothing but themselves: no script, no
// external asset. A run's reflections and the gate's decisions are
// writeup's sections, the same as the reflection report's. Each format is
// one file of this package and is pinned by golden files (testdata/).
//
// It reads results and histories; it runs nothing and stores nothing.
package report
