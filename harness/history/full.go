package history

import (
	"context"
	"encoding/json"
	"fmt"
)

// Full is a run with everything a report of it shows: its history (Run,
// without the world's ledger), its reflections and the gate's decisions,
// the headers of the isolated re-runs its reflections made, and each
// attempt's kept output. It is what `overnight report`, the reflection
// report and `overnight serve` render, and what the control socket hands
// to a viewer while another process owns the state dir.
type Full struct {
	Run         *Run               `json:"run"`
	Reflections []ReflectionRecord `json:"reflections"`
	Gate        []GateRecord       `json:"gate"`
	// Isolated are the records of the isolated re-runs the reflections made
	// (replays, counterfactuals, verifications), by run id.
	Isolated map[string]RunRecord `json:"isolated,omitempty"`
	Logs     []AttemptLog         `json:"logs"`
	// Report is the agent's report file with its content, when the
	// scenario names one and the agent reported done.
	Report *AgentReport `json:"report,omitempty"`
}

// AgentReport is the agent's report file and, when it was kept, its
// content.
type AgentReport struct {
	ReportRecord
	Content string `json:"content,omitempty"`
}

// MaxShownPayload bounds each LLM request and response that Full inlines:
// a report is read by a person, and the journal keeps the whole (Reader's
// LLMRequest and LLMResponse).
const MaxShownPayload = 256 << 10

// Full reads everything a report of run id shows. The LLM exchanges'
// requests and responses kept as blobs are inlined (up to MaxShownPayload
// each, the rest cut with a note); the world's ledger is not read.
func (r *Reader) Full(ctx context.Context, id string) (*Full, error) {
	run, err := r.load(ctx, id, false)
	if err != nil {
		return nil, err
	}
	f := &Full{Run: run, Isolated: map[string]RunRecord{}}
	for i := range run.LLM {
		if err := r.inlineLLM(&run.LLM[i]); err != nil {
			return nil, err
		}
	}
	if f.Reflections, err = r.Reflections(id); err != nil {
		return nil, err
	}
	if f.Gate, err = r.GateDecisions(id); err != nil {
		return nil, err
	}
	for _, refl := range f.Reflections {
		for _, iso := range refl.IsolatedRuns() {
			if rec, err := r.Run(iso); err == nil {
				f.Isolated[iso] = rec
			}
		}
	}
	if f.Logs, err = r.Logs(id); err != nil {
		return nil, err
	}
	if f.Report, err = r.AgentReport(run.Done); err != nil {
		return nil, fmt.Errorf("run %s: %w", id, err)
	}
	return f, nil
}

// inlineLLM replaces an exchange's blob references by the payloads, cut
// at MaxShownPayload.
func (r *Reader) inlineLLM(rec *LLMRecord) error {
	if rec.RequestBlob != "" {
		b, err := r.LLMRequest(*rec)
		if err != nil {
			return err
		}
		rec.Request, rec.RequestBlob = shown(b), ""
	}
	if rec.ResponseBlob != "" {
		b, err := r.LLMResponse(*rec)
		if err != nil {
			return err
		}
		rec.Response, rec.ResponseBlob = shown(b), ""
	}
	return nil
}

// shown is b as JSON a report can carry: b itself when it is short, else
// its beginning as a JSON string with a note of what was cut.
func shown(b []byte) []byte {
	if len(b) <= MaxShownPayload {
		return b
	}
	cut, _ := json.Marshal(fmt.Sprintf("%s… (%d more bytes in the journal)", b[:MaxShownPayload], len(b)-MaxShownPayload))
	return cut
}

// IsolatedRuns lists the isolated re-runs a reflection made: its replays,
// its counterfactual and its verification.
func (r *ReflectionRecord) IsolatedRuns() []string {
	var ids []string
	for _, rp := range r.Replays {
		ids = append(ids, rp.RunID)
	}
	if r.Counterfactual != nil {
		ids = append(ids, r.Counterfactual.RunID)
	}
	if r.Verification != nil {
		ids = append(ids, r.Verification.RunID)
	}
	return ids
}

// AgentReport reads the agent's report file that done (the run's claim)
// records, with its content when it was kept; nil when there is none.
func (r *Reader) AgentReport(done *DoneRecord) (*AgentReport, error) {
	if done == nil || done.Report == nil {
		return nil, nil
	}
	out := &AgentReport{ReportRecord: *done.Report}
	if out.Status != ReportKept {
		return out, nil
	}
	b, err := r.j.Blob(out.SHA256)
	if err != nil {
		return nil, fmt.Errorf("read the agent's report %s: %w", out.Path, err)
	}
	out.Content = string(b)
	return out, nil
}
