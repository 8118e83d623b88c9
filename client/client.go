package client

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/brimnode/brim/internal/masteraddr"
	"github.com/brimnode/brim/master/api"
)

var (
	// ErrUnreachable: no answer from the master (connection refused,
	// reset, timed out, TLS failure).
	ErrUnreachable = errors.New("cannot reach the master")
	// ErrServesTLS: the master's address completes a TLS handshake, but
	// the client was not configured for TLS.
	ErrServesTLS = errors.New("the master serves TLS: give the CA that signed its certificate (--master-ca)")
)

// DefaultTimeout bounds one request when Config.Timeout is zero.
const DefaultTimeout = 30 * time.Second

// APIError is an answer of the master other than 200 OK.
type APIError struct {
	// Status is the HTTP status code.
	Status int
	// Message is the master's error message (its JSON "error" field, else
	// the body).
	Message string
}

func (e *APIError) Error() string { return fmt.Sprintf("%s (HTTP %d)", e.Message, e.Status) }

// Config configures a Client.
type Config struct {
	// Master is the master's address, host:port, or a comma-separated
	// list of the masters of a highly available cluster: a request goes
	// to the leader (a standby's 307 is followed, credentials sent again)
	// and to the next listed master when one cannot be reached.
	Master string
	// Principal and Secret authenticate with HTTP basic authentication;
	// nothing is sent without a Principal.
	Principal, Secret string
	// TLS, when set, makes the client use https and verify the master
	// with it.
	TLS *tls.Config
	// Timeout bounds each request (default DefaultTimeout).
	Timeout time.Duration
}

// Client talks to the master's operator HTTP API. Safe for concurrent
// use; it holds idle connections, released by CloseIdleConnections.
type Client struct {
	cfg     Config
	scheme  string
	masters *masteraddr.Set
	hc      *http.Client
}

// New returns a client of the master at cfg.Master. It does no I/O.
func New(cfg Config) (*Client, error) {
	if cfg.Master == "" {
		return nil, errors.New("new client: no master address")
	}
	if strings.Contains(cfg.Principal, ":") {
		return nil, fmt.Errorf("new client: principal %q: must not contain ':'", cfg.Principal)
	}
	addrs, err := masteraddr.Parse(cfg.Master)
	if err != nil {
		return nil, fmt.Errorf("new client: %w", err)
	}
	scheme := "http://"
	if cfg.TLS != nil {
		scheme = "https://"
	}
	timeout := cfg.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	return &Client{cfg: cfg, scheme: scheme, masters: masteraddr.NewSet(addrs),
		hc: &http.Client{Timeout: timeout, Transport: &http.Transport{TLSClientConfig: cfg.TLS},
			// A standby's 307 is followed by do, which sends the
			// credentials again (net/http drops them for another host).
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}, nil
}

// maxRedirects bounds the standbys' redirects one request follows.
const maxRedirects = 3

// CloseIdleConnections closes the client's idle connections.
func (c *Client) CloseIdleConnections() { c.hc.CloseIdleConnections() }

// State returns the master's state (GET /state).
func (c *Client) State(ctx context.Context) (*api.State, error) {
	var st api.State
	if err := c.do(ctx, http.MethodGet, "/state", nil, &st); err != nil {
		return nil, err
	}
	return &st, nil
}

// Reserve dynamically reserves resources of an agent (POST /reserve).
func (c *Client) Reserve(ctx context.Context, req api.ReserveRequest) error {
	return c.do(ctx, http.MethodPost, "/reserve", req, nil)
}

// Unreserve releases dynamic reservations (POST /unreserve).
func (c *Client) Unreserve(ctx context.Context, req api.ReserveRequest) error {
	return c.do(ctx, http.MethodPost, "/unreserve", req, nil)
}

// Quota returns every role's quota (GET /quota).
func (c *Client) Quota(ctx context.Context) (map[string]api.QuotaState, error) {
	var q map[string]api.QuotaState
	if err := c.do(ctx, http.MethodGet, "/quota", nil, &q); err != nil {
		return nil, err
	}
	return q, nil
}

// SetQuota sets or (with neither guarantee nor limit) removes a role's
// quota (POST /quota).
func (c *Client) SetQuota(ctx context.Context, req api.QuotaRequest) error {
	return c.do(ctx, http.MethodPost, "/quota", req, nil)
}

// Weights returns the roles' weights (GET /weights).
func (c *Client) Weights(ctx context.Context) (map[string]float64, error) {
	var ws map[string]float64
	if err := c.do(ctx, http.MethodGet, "/weights", nil, &ws); err != nil {
		return nil, err
	}
	return ws, nil
}

// ParseWeights parses ROLE=WEIGHT arguments (brim weights) into the
// request SetWeights sends; a weight must be a positive number.
func ParseWeights(args []string) ([]api.WeightRequest, error) {
	var req []api.WeightRequest
	for _, a := range args {
		role, w, ok := strings.Cut(a, "=")
		if !ok || role == "" {
			return nil, fmt.Errorf("%q: want ROLE=WEIGHT", a)
		}
		v, err := strconv.ParseFloat(w, 64)
		if err != nil {
			// ParseFloat reads "Inf" and "NaN": CheckWeight refuses them.
			return nil, fmt.Errorf("%q: want ROLE=WEIGHT with a number as the weight", a)
		}
		if err := api.CheckWeight(v); err != nil {
			return nil, fmt.Errorf("%q: %w", a, err)
		}
		req = append(req, api.WeightRequest{Role: role, Weight: v})
	}
	return req, nil
}

// SetWeights sets roles' weights (POST /weights).
func (c *Client) SetWeights(ctx context.Context, req []api.WeightRequest) error {
	return c.do(ctx, http.MethodPost, "/weights", req, nil)
}

// do sends a request to the leader and decodes a 200 answer into out:
// it follows a standby's redirect, and tries the next listed master when
// one cannot be reached (each once).
func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	var data []byte
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return fmt.Errorf("encode %s %s: %w", method, path, err)
		}
		data = b
	}
	unreachable, redirects := 0, 0
	for {
		addr := c.masters.Current()
		leader, err := c.once(ctx, addr, method, path, data, out)
		switch {
		case leader != "" && redirects < maxRedirects:
			redirects++
			c.masters.Follow(leader)
		case leader != "":
			return fmt.Errorf("%w: %d redirects from standby to standby (last to %s)", ErrUnreachable, redirects, leader)
		case errors.Is(err, ErrUnreachable) && ctx.Err() == nil && c.masters.Len() > 1 && unreachable+1 < c.masters.Len():
			unreachable++
			c.masters.Failed()
		default:
			return err
		}
	}
}

// once sends one request to addr; a 307 returns the leader it names.
func (c *Client) once(ctx context.Context, addr, method, path string, data []byte, out any) (leader string, err error) {
	var rd io.Reader
	if data != nil {
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.scheme+addr+path, rd)
	if err != nil {
		return "", err
	}
	if c.cfg.Principal != "" {
		req.SetBasicAuth(c.cfg.Principal, c.cfg.Secret)
	}
	if data != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", c.unreachable(ctx, addr, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", fmt.Errorf("%w at %s: read answer: %w", ErrUnreachable, addr, err)
	}
	if resp.StatusCode == http.StatusTemporaryRedirect {
		if u, perr := url.Parse(resp.Header.Get("Location")); perr == nil && u.Host != "" {
			return u.Host, nil
		}
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.Unmarshal(b, &e)
		if e.Error == "" {
			e.Error = strings.TrimSpace(string(b))
		}
		// net/http's own TLS server answers a plain request so.
		if c.cfg.TLS == nil && resp.StatusCode == http.StatusBadRequest && strings.Contains(e.Error, "HTTP request to an HTTPS server") {
			return "", fmt.Errorf("%w at %s: %s (%w)", ErrUnreachable, addr, e.Error, ErrServesTLS)
		}
		return "", &APIError{Status: resp.StatusCode, Message: e.Error}
	}
	if out == nil {
		return "", nil
	}
	if err := json.Unmarshal(b, out); err != nil {
		return "", fmt.Errorf("decode the answer to %s %s: %w", method, path, err)
	}
	return "", nil
}

// unreachable wraps a transport error in ErrUnreachable, and in
// ErrServesTLS when that explains it.
func (c *Client) unreachable(ctx context.Context, addr string, err error) error {
	if c.cfg.TLS == nil && ServesTLS(ctx, addr) {
		return fmt.Errorf("%w at %s: %w (%w)", ErrUnreachable, addr, err, ErrServesTLS)
	}
	return fmt.Errorf("%w at %s: %w", ErrUnreachable, addr, err)
}

// ServesTLS reports whether addr completes a TLS handshake (certificate
// not verified: only to explain why a plain connection failed). It takes
// at most 5 s.
func ServesTLS(ctx context.Context, addr string) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	d := tls.Dialer{NetDialer: &net.Dialer{}, Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}} // a probe: nothing is sent
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return false
	}
	c.Close()
	return true
}
