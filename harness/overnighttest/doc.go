// Package overnighttest is for Go test suites — Ginkgo and Gomega, or plain
// go test — that put an agent through chaos, as net/http/httptest is for
// HTTP handlers.
//
// Run runs one scenario — a built-in name, a scenario file, YAML bytes or a
// *scenarios.Scenario — with the run flags of `overnight run` as options
// (Seed, Faults, ChaosRandom, Agent, LLM, Timeout, MaxAttempts, Lessons)
// against a harness it opens around the run and closes after it, on a
// state dir of its own (removed, with every container, volume and network
// of the run) or one given with StateDir. RunTrials runs a scenario once
// per seed through harness/suite: the seeds are trials, judged by pass^k.
//
// The Gomega matchers Pass, HoldInvariant, SurviveFaults and HavePassK
// judge what Run and RunTrials return (and the harness's and harness/suite's
// own result types). Their failure messages show each run's verdict and
// reason, the failing invariants' detail, the faults not met, and the
// command that reproduces the run on its own: `overnight run SCENARIO
// --seed N ...`, as harness/suite builds it for `overnight suite`.
//
// A sandbox runs a static overnight binary as its PID 1 (overnight-sandbox,
// or the full overnight); under go test the running executable is the test
// binary, which cannot serve. A suite therefore calls BuildInitBinary once
// (in BeforeSuite, or TestMain), or sets OVERNIGHT_INIT_BINARY to one built
// beforehand.
//
// A harness-crash fault would end the test process itself (the harness is
// in it): Run and RunTrials refuse it (ErrHarnessCrash). A harness crash is
// tested with the overnight CLI as a child process, then `overnight resume`.
//
// This package judges nothing itself: verdicts are the harness's, pass^k
// and requirements are harness/suite's. It is for tests; nothing in the
// product imports it.
package overnighttest
