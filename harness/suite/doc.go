// Package suite runs chaos test suites and judges them as a CI gate: a
// suite is scenarios × agent variants × seeds (and the run flags every run
// shares: a fault schedule or --chaos random, the model, limits), run under
// a worker pool against one harness; its runs are grouped by scenario and
// agent, each group's seeds being its trials, and judged by tau-bench's
// pass^k (the chance that k trials drawn from the group all pass) and
// pass@k; a requirement over those (`pass^3>=0.9 && unknown==0`) decides
// the suite's exit code.
//
// It also owns sharding (a stable hash splits a suite's cases across the
// jobs of a CI matrix), merging the shards' results and judging them as one,
// and the failing-seed corpus kept in the state dir (cases a suite saw
// fail, re-run first by the next suite of the same configuration).
//
// It runs runs through harness.Harness and reads what it stores through
// harness/history; it renders nothing (see harness/report) and knows no
// command line (see cmd/overnight).
package suite
