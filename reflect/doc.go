// Package reflect is overnight's reflection loop and its gate: when a run
// fails, the failure is captured, the failing attempt is replayed in
// isolation against a shadow world (with the run's faults re-applied at the
// same points and the model answering from its recording), the failure is
// diagnosed deterministically — then a lesson is drawn (by the run's model
// when it has one), and the agent with the lesson is verified in isolation
// where its next attempt will stand. Only a verified lesson lets the
// agent's guarded effects reach the real world again; every step is
// journaled and written up for a person (Report).
//
// It plugs into the harness through harness.Extension (Extension): a gate
// stage on the effect path, a source of lessons for GET /v1/run, a failure
// hook and an attempt policy. It imports harness and reads and writes only
// through harness/history; harness never imports it.
//
// The gate's policies come from the scenario's gate: list (first match
// wins, glob patterns on the effect kind): allow; verify (guarded by
// reflection: held while one runs, released on a verified lesson, denied
// once one gave up); approve (held until a person approves or denies it,
// at most limits.approval of real time); deny (never executed). An effect
// no rule matches is allowed, but an MCP tool call that is not read-only
// (its readOnlyHint) is verify when the scenario has reflect:.
package reflect
