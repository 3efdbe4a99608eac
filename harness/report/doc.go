// Package report renders what overnight ran for the people and the CI
// systems that read it: a suite's result as JUnit XML (testsuite per
// scenario and agent, testcase per seed, failure with the reason and the
// reproducing command, skipped for unknown), as JSON, and as a Markdown
// summary fit for a CI step summary. Each format is one file of this
// package and is pinned by golden files (testdata/).
//
// It reads results; it runs nothing and stores nothing.
package report
