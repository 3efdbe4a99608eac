package history

import "fmt"

// PoisonedCheckpoint is a checkpoint whose claims the world contradicted
// as it was written, in a result.
type PoisonedCheckpoint struct {
	Seq     int64  `json:"seq"`
	Step    int    `json:"step"`
	Attempt int    `json:"attempt"`
	Reason  string `json:"reason"`
	// RolledBackBy is the seq of the rollback checkpoint that replaced it
	// (0: none did).
	RolledBackBy int64 `json:"rolled_back_by,omitempty"`
}

// Rollback is a checkpoint the harness wrote (rollback: consistent) so
// that an attempt would not resume from a poisoned one, in a result.
type Rollback struct {
	Seq     int64 `json:"seq"`
	Attempt int   `json:"attempt"` // the attempt it was written for
	// Of is the poisoned checkpoint it replaced, From the consistent one
	// whose step and state it carries (0: the start).
	Of   int64 `json:"rollback_of"`
	From int64 `json:"rollback_from"`
	Step int   `json:"step"`
	// RolledPast labels the effects journaled after From: the world keeps
	// them; they are shown, not undone.
	RolledPast []string `json:"rolled_past,omitempty"`
}

// PoisonOf lists a run's poisoned checkpoints and its rollbacks, in seq
// order.
func PoisonOf(cps []CheckpointRecord) ([]PoisonedCheckpoint, []Rollback) {
	var poisoned []PoisonedCheckpoint
	var rollbacks []Rollback
	for _, c := range cps {
		switch {
		case c.RollbackOf > 0:
			rb := Rollback{Seq: c.Seq, Attempt: c.Attempt, Of: c.RollbackOf, From: c.RollbackFrom, Step: c.Step}
			for _, id := range c.RolledPast {
				rb.RolledPast = append(rb.RolledPast, EffectLabel(id))
			}
			rollbacks = append(rollbacks, rb)
			for i := range poisoned {
				if poisoned[i].Seq >= c.RollbackOf && poisoned[i].RolledBackBy == 0 {
					poisoned[i].RolledBackBy = c.Seq
				}
			}
		case c.Poisoned():
			poisoned = append(poisoned, PoisonedCheckpoint{Seq: c.Seq, Step: c.Step, Attempt: c.Attempt, Reason: c.Consistency.Reason})
		}
	}
	return poisoned, rollbacks
}

// FromText says where a rollback went back to, for a person.
func (r Rollback) FromText() string {
	if r.From == 0 {
		return "the start (step 0)"
	}
	return fmt.Sprintf("checkpoint %d (step %d)", r.From, r.Step)
}
