package transport

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/brimnode/brim/demand"
	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/api"
)

// demandRoutes adds the demand endpoints: GET /demands, GET /demands/ID,
// POST /demands (one document or a JSON list of them, all or nothing; a
// document as stored already is no conflict), PUT /demands/ID (a new
// document for the demand), DELETE /demands/ID (cancel). Changes need
// submit_demand for the demand's role.
func (h *httpAPI) demandRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /demands", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, demandsToAPI(h.m.Demands()))
	})
	mux.HandleFunc("GET /demands/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, err := h.m.Demand(r.PathValue("id"))
		if err != nil {
			h.failDemand(w, err)
			return
		}
		writeJSON(w, http.StatusOK, demandToAPI(d))
	})
	mux.HandleFunc("POST /demands", h.submitDemands)
	mux.HandleFunc("PUT /demands/{id}", h.updateDemand)
	mux.HandleFunc("DELETE /demands/{id}", func(w http.ResponseWriter, r *http.Request) {
		p, err := h.principal(r)
		if err != nil {
			h.fail(w, err)
			return
		}
		err = h.m.CancelDemand(r.PathValue("id"), func(d *demand.Demand) error { return h.authorize(p, ActionSubmitDemand, d.Role) })
		if err != nil {
			h.failDemand(w, err)
			return
		}
		d, _ := h.m.Demand(r.PathValue("id"))
		writeJSON(w, http.StatusOK, demandToAPI(d))
	})
}

// failDemand is fail, with 404 for a demand the path names that does not
// exist (elsewhere ErrNotFound names a bad argument: 400).
func (h *httpAPI) failDemand(w http.ResponseWriter, err error) {
	if errors.Is(err, master.ErrNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	h.fail(w, err)
}

// readDemandBody reads a demand request's body, at most MaxBodyBytes.
func readDemandBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return nil, fmt.Errorf("request body over %d bytes: %w", MaxBodyBytes, err)
		}
		return nil, fmt.Errorf("read body: %w: %w", master.ErrInvalid, err)
	}
	return body, nil
}

// updateDemand is PUT /demands/ID: one document, its DemandID the path's
// (filled in when missing).
func (h *httpAPI) updateDemand(w http.ResponseWriter, r *http.Request) {
	p, err := h.principal(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	body, err := readDemandBody(w, r)
	if err != nil {
		h.fail(w, err)
		return
	}
	id := r.PathValue("id")
	s, err := ParseDemandUpdate(id, body)
	if err != nil {
		h.fail(w, err)
		return
	}
	d, err := h.m.UpdateDemand(id, s, func(role string) error { return h.authorize(p, ActionSubmitDemand, role) })
	if err != nil {
		h.failDemand(w, err)
		return
	}
	writeJSON(w, http.StatusOK, demandToAPI(d))
}

// ParseDemandUpdate reads the document of PUT /demands/ID: one object,
// whose DemandID, when given, must be id. Errors wrap master.ErrInvalid.
func ParseDemandUpdate(id string, body []byte) (*demand.Spec, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(bytes.TrimSpace(body), &m); err != nil || m == nil {
		return nil, fmt.Errorf("%w: demand %s: want one JSON object: %v", master.ErrInvalid, id, err)
	}
	if _, ok := m["DemandID"]; !ok {
		raw, _ := json.Marshal(id)
		m["DemandID"] = raw
		body, _ = json.Marshal(m)
	}
	s, err := demand.ParseSpec(body)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", master.ErrInvalid, err)
	}
	if s.Time.DemandID != id {
		return nil, fmt.Errorf("%w: DemandID: %q: the path names demand %s", master.ErrInvalid, s.Time.DemandID, id)
	}
	return s, nil
}

func (h *httpAPI) submitDemands(w http.ResponseWriter, r *http.Request) {
	p, err := h.principal(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	body, err := readDemandBody(w, r)
	if err != nil {
		h.fail(w, err)
		return
	}
	specs, err := ParseDemandDocuments(body)
	if err != nil {
		h.fail(w, err)
		return
	}
	ds, err := h.m.SubmitDemands(specs, func(role string) error { return h.authorize(p, ActionSubmitDemand, role) })
	if err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, demandsToAPI(ds))
}

// ParseDemandDocuments reads one demand document or a JSON list of them.
// Errors wrap master.ErrInvalid and name the entry and field.
func ParseDemandDocuments(body []byte) ([]*demand.Spec, error) {
	t := bytes.TrimSpace(body)
	var docs []json.RawMessage
	if len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &docs); err != nil {
			return nil, fmt.Errorf("%w: malformed JSON list of demands: %w", master.ErrInvalid, err)
		}
		if len(docs) == 0 {
			return nil, fmt.Errorf("%w: an empty list of demands", master.ErrInvalid)
		}
	} else {
		docs = []json.RawMessage{t}
	}
	specs := make([]*demand.Spec, 0, len(docs))
	for i, doc := range docs {
		s, err := demand.ParseSpec(doc)
		if err != nil {
			if len(docs) > 1 {
				return nil, fmt.Errorf("%w: demands[%d]: %w", master.ErrInvalid, i, err)
			}
			return nil, fmt.Errorf("%w: %w", master.ErrInvalid, err)
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// demandsToAPI is ds as the operator API shows them; [] for none.
func demandsToAPI(ds []demand.Demand) []api.Demand {
	out := make([]api.Demand, len(ds))
	for i, d := range ds {
		out[i] = demandToAPI(d)
	}
	return out
}

// demandToAPI is d as the operator API shows it (TestDemandToAPI: every
// field of the domain's record, under the name it always had).
func demandToAPI(d demand.Demand) api.Demand {
	out := api.Demand{ID: d.ID, Doc: d.Doc, Framework: d.Framework, Role: d.Role, State: d.State.String(), Reason: string(d.Reason),
		Message: d.Message, Submitted: d.Submitted, Updated: d.Updated, Start: d.Start, End: d.End, Late: d.Late, Relaxed: d.Relaxed,
		AllocatedAt: d.AllocatedAt, ClaimedAt: d.ClaimedAt, EndedAt: d.EndedAt, Opportunities: d.Opportunities, Handed: d.Handed,
		Launched: d.Launched, LiveTasks: d.LiveTasks, Failures: d.Failures, History: make([]api.DemandTransition, len(d.History))}
	for _, s := range d.Placement {
		out.Placement = append(out.Placement, api.DemandSlot{Agent: s.Agent, Tasks: s.Tasks, Handed: s.Handed})
	}
	for i, h := range d.History {
		out.History[i] = api.DemandTransition{At: h.At, From: h.From.String(), To: h.To.String(), Reason: string(h.Reason), Message: h.Message}
	}
	return out
}
