package agent

// CheckpointBody is checkpointBody, for the specs.
func CheckpointBody(step int, state, claims any, expect *int64) ([]byte, error) {
	return checkpointBody(step, state, claims, expect)
}
