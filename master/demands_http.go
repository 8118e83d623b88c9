package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/brimnode/brim/demand"
)

// demandRoutes adds the demand endpoints: GET /demands, GET /demands/ID,
// POST /demands (one document or a JSON list of them, all or nothing),
// DELETE /demands/ID (cancel). Changes need submit_demand for the
// demand's role.
func (h *httpAPI) demandRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /demands", func(w http.ResponseWriter, r *http.Request) {
		ds := h.m.Demands()
		if ds == nil {
			ds = []demand.Demand{}
		}
		writeJSON(w, http.StatusOK, ds)
	})
	mux.HandleFunc("GET /demands/{id}", func(w http.ResponseWriter, r *http.Request) {
		d, err := h.m.Demand(r.PathValue("id"))
		if err != nil {
			h.failDemand(w, err)
			return
		}
		writeJSON(w, http.StatusOK, d)
	})
	mux.HandleFunc("POST /demands", h.submitDemands)
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
		writeJSON(w, http.StatusOK, d)
	})
}

// failDemand is fail, with 404 for a demand the path names that does not
// exist (elsewhere ErrNotFound names a bad argument: 400).
func (h *httpAPI) failDemand(w http.ResponseWriter, err error) {
	if errors.Is(err, ErrNotFound) {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": err.Error()})
		return
	}
	h.fail(w, err)
}

func (h *httpAPI) submitDemands(w http.ResponseWriter, r *http.Request) {
	p, err := h.principal(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.fail(w, fmt.Errorf("request body over %d bytes: %w", MaxBodyBytes, err))
			return
		}
		h.fail(w, fmt.Errorf("read body: %w: %w", ErrInvalid, err))
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
	writeJSON(w, http.StatusOK, ds)
}

// ParseDemandDocuments reads one demand document or a JSON list of them.
// Errors wrap ErrInvalid and name the entry and field.
func ParseDemandDocuments(body []byte) ([]*demand.Spec, error) {
	t := bytes.TrimSpace(body)
	var docs []json.RawMessage
	if len(t) > 0 && t[0] == '[' {
		if err := json.Unmarshal(t, &docs); err != nil {
			return nil, fmt.Errorf("%w: malformed JSON list of demands: %w", ErrInvalid, err)
		}
		if len(docs) == 0 {
			return nil, fmt.Errorf("%w: an empty list of demands", ErrInvalid)
		}
	} else {
		docs = []json.RawMessage{t}
	}
	specs := make([]*demand.Spec, 0, len(docs))
	for i, doc := range docs {
		s, err := demand.ParseSpec(doc)
		if err != nil {
			if len(docs) > 1 {
				return nil, fmt.Errorf("%w: demands[%d]: %w", ErrInvalid, i, err)
			}
			return nil, fmt.Errorf("%w: %w", ErrInvalid, err)
		}
		specs = append(specs, s)
	}
	return specs, nil
}
