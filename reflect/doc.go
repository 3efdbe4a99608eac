// Package reflect will own overnight's reflection loop: capture a failed
// run, fork it from a checkpoint into an isolated sandbox, replay it with
// divergence detection, diagnose deterministically, draw a lesson, verify
// the corrected behaviour in isolation, and only then let the agent act on
// the real world again.
//
// Nothing of that is implemented yet: this package is empty in this
// version, and no command or result claims otherwise. What exists today
// that reflection will build on is in harness: the journal of every
// checkpoint, effect, fault and event of a run, the world's own ledger, and
// resume from any recorded state.
package reflect
