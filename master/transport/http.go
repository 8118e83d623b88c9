package transport

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/brimnode/brim/master"
	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/master/api"
	"github.com/brimnode/brim/resources"
)

// Handler serves the operator API: GET /state, POST /reserve and
// /unreserve, GET/POST /quota, GET/POST /weights, the demands
// (demands_http.go), and /health, /version, /metrics (metrics.go).
// Reads are open (like Mesos's default,
// authenticate_http_readonly=false); changes are authenticated and
// authorized by the API's Authorizer. Without one nothing is
// authenticated and the principal is "anonymous".
// Status codes follow Mesos: 200, 400 bad arguments, 401 unauthenticated,
// 403 not permitted, 409 insufficient resources; 413 for a body over
// MaxBodyBytes, 404 and 405 for an unknown path or method, 500 when the
// store cannot record a change (which is then not applied). Every error
// is a JSON object {"error": "…"}.
func (a *API) Handler() http.Handler {
	m := a.m
	mux := http.NewServeMux()
	h := &httpAPI{a: a, m: m, mux: mux}
	mux.HandleFunc("GET /state", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.State())
	})
	mux.HandleFunc("POST /reserve", h.reservation(false))
	mux.HandleFunc("POST /unreserve", h.reservation(true))
	mux.HandleFunc("GET /quota", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.State().Quota)
	})
	mux.HandleFunc("POST /quota", h.setQuota)
	mux.HandleFunc("GET /weights", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, m.State().Weights)
	})
	mux.HandleFunc("POST /weights", h.setWeights)
	h.demandRoutes(mux)
	a.serviceRoutes(mux)
	return h
}

// MaxBodyBytes is the largest request body the operator API reads; a
// larger one is answered 413.
const MaxBodyBytes = 1 << 20

type httpAPI struct {
	a   *API
	m   *master.Master
	mux *http.ServeMux
}

// ServeHTTP routes a request; what the mux has no route for (404, or 405
// with its Allow header) is answered in JSON like every other error.
func (h *httpAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if _, pattern := h.mux.Handler(r); pattern != "" {
		h.mux.ServeHTTP(w, r)
		return
	}
	rec := &statusRecorder{header: http.Header{}}
	h.mux.ServeHTTP(rec, r)
	if allow := rec.header.Get("Allow"); allow != "" {
		w.Header().Set("Allow", allow)
	}
	code := rec.code
	if code == 0 {
		code = http.StatusNotFound
	}
	msg := fmt.Sprintf("no endpoint %s %s", r.Method, r.URL.Path)
	if code == http.StatusMethodNotAllowed {
		msg = fmt.Sprintf("method %s not allowed on %s (allowed: %s)", r.Method, r.URL.Path, rec.header.Get("Allow"))
	}
	writeJSON(w, code, map[string]string{"error": msg})
}

// statusRecorder keeps the status and headers of the mux's own 404 and
// 405 answers and drops their plain-text bodies.
type statusRecorder struct {
	header http.Header
	code   int
}

func (s *statusRecorder) Header() http.Header         { return s.header }
func (s *statusRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (s *statusRecorder) WriteHeader(code int)        { s.code = code }

func (h *httpAPI) principal(r *http.Request) (string, error) {
	auth := h.a.authorizer()
	if auth == nil {
		return master.Anonymous, nil
	}
	return auth.Authenticate(r)
}

func (h *httpAPI) authorize(p, action, role string) error {
	auth := h.a.authorizer()
	if auth == nil {
		return nil
	}
	return auth.Authorize(p, action, role)
}

// fail writes err as JSON with the status httpStatus maps it to.
func (h *httpAPI) fail(w http.ResponseWriter, err error) {
	h.a.metrics.authFailure("http", err)
	code := httpStatus(err)
	if code == http.StatusUnauthorized {
		w.Header().Set("WWW-Authenticate", `Basic realm="brim"`)
	}
	writeJSON(w, code, map[string]string{"error": err.Error()})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}

// decode reads one JSON value of at most MaxBodyBytes into v; fields v
// does not have are refused. Errors wrap ErrInvalid, or
// *http.MaxBytesError for a body too large.
func decode(w http.ResponseWriter, r *http.Request, v any) error {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil && dec.More() {
		err = errors.New("data after the JSON value")
	}
	if err == nil {
		return nil
	}
	var tooLarge *http.MaxBytesError
	if errors.As(err, &tooLarge) {
		return fmt.Errorf("request body over %d bytes: %w", MaxBodyBytes, err)
	}
	return fmt.Errorf("malformed JSON body: %w: %w", master.ErrInvalid, err)
}

func (h *httpAPI) reservation(unreserve bool) http.HandlerFunc {
	action := ActionReserve
	if unreserve {
		action = ActionUnreserve
	}
	return func(w http.ResponseWriter, r *http.Request) {
		p, err := h.principal(r)
		if err != nil {
			h.fail(w, err)
			return
		}
		var req api.ReserveRequest
		if err := decode(w, r, &req); err != nil {
			h.fail(w, err)
			return
		}
		if req.AgentID == "" {
			h.fail(w, fmt.Errorf("agentId is required: %w", master.ErrInvalid))
			return
		}
		res, err := resources.Parse(req.Resources)
		if err != nil {
			h.fail(w, fmt.Errorf("resources: %w: %w", master.ErrInvalid, err))
			return
		}
		for role := range res.ByRole() {
			if role == resources.Unreserved {
				continue // rejected below with a message
			}
			if err := master.ValidateRole(role); err != nil {
				h.fail(w, err)
				return
			}
			if err := h.authorize(p, action, role); err != nil {
				h.fail(w, err)
				return
			}
		}
		if unreserve {
			err = h.m.Unreserve(req.AgentID, p, res)
		} else {
			err = h.m.Reserve(req.AgentID, p, res)
		}
		if err != nil {
			h.fail(w, err)
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
	}
}

func (h *httpAPI) setQuota(w http.ResponseWriter, r *http.Request) {
	p, err := h.principal(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	var req api.QuotaRequest
	if err := decode(w, r, &req); err != nil {
		h.fail(w, err)
		return
	}
	if req.Role == "" {
		h.fail(w, fmt.Errorf("role is required: %w", master.ErrInvalid))
		return
	}
	if err := master.ValidateRole(req.Role); err != nil {
		h.fail(w, err)
		return
	}
	if err := h.authorize(p, ActionSetQuota, req.Role); err != nil {
		h.fail(w, err)
		return
	}
	g, err := resources.Parse(req.Guarantee)
	if err != nil {
		h.fail(w, fmt.Errorf("guarantee: %w: %w", master.ErrInvalid, err))
		return
	}
	l, err := resources.Parse(req.Limit)
	if err != nil {
		h.fail(w, fmt.Errorf("limit: %w: %w", master.ErrInvalid, err))
		return
	}
	if err := h.m.SetQuota(req.Role, allocator.Quota{Guarantee: g, Limit: l}); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}

func (h *httpAPI) setWeights(w http.ResponseWriter, r *http.Request) {
	p, err := h.principal(r)
	if err != nil {
		h.fail(w, err)
		return
	}
	var req []api.WeightRequest
	if err := decode(w, r, &req); err != nil {
		h.fail(w, err)
		return
	}
	weights := map[string]float64{}
	for _, x := range req {
		if x.Role == "" {
			h.fail(w, fmt.Errorf("weight =%s: need a role: %w", strconv.FormatFloat(x.Weight, 'g', -1, 64), master.ErrInvalid))
			return
		}
		if err := api.CheckWeight(x.Weight); err != nil {
			h.fail(w, fmt.Errorf("weight of %s: %w: %w", x.Role, err, master.ErrInvalid))
			return
		}
		if err := master.ValidateRole(x.Role); err != nil {
			h.fail(w, err)
			return
		}
		if _, dup := weights[x.Role]; dup {
			h.fail(w, fmt.Errorf("weight of %s given twice: %w", x.Role, master.ErrInvalid))
			return
		}
		if err := h.authorize(p, ActionSetWeight, x.Role); err != nil {
			h.fail(w, err)
			return
		}
		weights[x.Role] = x.Weight
	}
	if err := h.m.SetWeights(weights); err != nil {
		h.fail(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"result": "ok"})
}
