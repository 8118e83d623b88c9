package client_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/brimnode/brim/client"
	"github.com/brimnode/brim/master/api"
	"github.com/brimnode/brim/master/transport"
	"google.golang.org/grpc"
)

func newClient(t *testing.T, cfg client.Config) *client.Client {
	t.Helper()
	c, err := client.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c
}

// fakeMaster answers like the master's HTTP API, for the client's side
// only: it records the requests it got.
type fakeMaster struct {
	got []string
}

func (f *fakeMaster) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	p, s, _ := r.BasicAuth()
	f.got = append(f.got, r.Method+" "+r.URL.Path+" "+p+":"+s+" "+r.Header.Get("Content-Type")+" "+string(b))
	switch r.Method + " " + r.URL.Path {
	case "GET /state":
		_ = json.NewEncoder(w).Encode(api.State{Agents: []api.AgentState{{ID: "a1", Hostname: "h"}}})
	case "GET /weights":
		_, _ = io.WriteString(w, `{"web":2}`)
	case "POST /reserve":
		w.WriteHeader(http.StatusConflict)
		_, _ = io.WriteString(w, `{"error":"cpus(ads):9 is not available on agent a1"}`)
	case "POST /quota":
		w.WriteHeader(http.StatusForbidden)
		_, _ = io.WriteString(w, "forbidden\n")
	default:
		w.WriteHeader(http.StatusOK)
	}
}

func TestClientRequests(t *testing.T) {
	fm := &fakeMaster{}
	srv := httptest.NewServer(fm)
	defer srv.Close()
	c := newClient(t, client.Config{Master: strings.TrimPrefix(srv.URL, "http://"), Principal: "ops", Secret: "s3"})
	ctx := context.Background()

	st, err := c.State(ctx)
	if err != nil || len(st.Agents) != 1 || st.Agents[0].ID != "a1" {
		t.Fatalf("State: %+v, %v", st, err)
	}
	ws, err := c.Weights(ctx)
	if err != nil || ws["web"] != 2 {
		t.Fatalf("Weights: %v, %v", ws, err)
	}
	var ae *client.APIError
	err = c.Reserve(ctx, api.ReserveRequest{AgentID: "a1", Resources: "cpus(ads):9"})
	if !errors.As(err, &ae) || ae.Status != http.StatusConflict || ae.Message != "cpus(ads):9 is not available on agent a1" {
		t.Fatalf("Reserve: %v", err)
	}
	err = c.SetQuota(ctx, api.QuotaRequest{Role: "web", Limit: "cpus:1"})
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || ae.Message != "forbidden" {
		t.Fatalf("SetQuota: %v", err)
	}
	if err := c.SetWeights(ctx, []api.WeightRequest{{Role: "web", Weight: 3}}); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"GET /state ops:s3  ",
		"GET /weights ops:s3  ",
		`POST /reserve ops:s3 application/json {"agentId":"a1","resources":"cpus(ads):9"}`,
		`POST /quota ops:s3 application/json {"role":"web","guarantee":"","limit":"cpus:1"}`,
		`POST /weights ops:s3 application/json [{"role":"web","weight":3}]`,
	}
	if strings.Join(fm.got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("requests:\n%s\nwant:\n%s", strings.Join(fm.got, "\n"), strings.Join(want, "\n"))
	}
}

func TestClientUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = newClient(t, client.Config{Master: addr}).State(context.Background())
	if !errors.Is(err, client.ErrUnreachable) || errors.Is(err, client.ErrServesTLS) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("closed port: %v", err)
	}
}

// TestClientTLSWithoutCA: a TLS master reached over plain HTTP says so,
// whether it closes the connection (brim's master: its port routes by the
// first bytes after the handshake) or answers 400 (net/http's TLS
// server); with its CA the same request succeeds.
func TestClientTLSWithoutCA(t *testing.T) {
	srv := httptest.NewTLSServer(&fakeMaster{})
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	defer srv.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- (&transport.Server{GRPC: grpc.NewServer(), HTTP: &fakeMaster{}}).Serve(ctx, tls.NewListener(l, srv.TLS.Clone()))
	}()
	defer func() { cancel(); <-done }()
	pool := x509.NewCertPool()
	pool.AddCert(srv.Certificate())
	for name, addr := range map[string]string{"net/http": strings.TrimPrefix(srv.URL, "https://"), "transport.Server": l.Addr().String()} {
		_, err := newClient(t, client.Config{Master: addr}).State(context.Background())
		if !errors.Is(err, client.ErrUnreachable) || !errors.Is(err, client.ErrServesTLS) {
			t.Errorf("%s: plain client of a TLS master: %v", name, err)
		} else if !strings.Contains(err.Error(), "--master-ca") {
			t.Errorf("%s: message does not name --master-ca: %v", name, err)
		}
		if _, err := newClient(t, client.Config{Master: addr, TLS: &tls.Config{RootCAs: pool}}).State(context.Background()); err != nil {
			t.Errorf("%s: with the CA: %v", name, err)
		}
	}
}

func TestClientConfig(t *testing.T) {
	if _, err := client.New(client.Config{}); err == nil {
		t.Error("no master address accepted")
	}
	if _, err := client.New(client.Config{Master: "x:1", Principal: "a:b"}); err == nil {
		t.Error("principal with ':' accepted")
	}
}

func TestParseWeights(t *testing.T) {
	got, err := client.ParseWeights([]string{"ads=2", "ops=0.5"})
	if err != nil || len(got) != 2 || got[0].Role != "ads" || got[0].Weight != 2 || got[1].Role != "ops" || got[1].Weight != 0.5 {
		t.Fatalf("ParseWeights = %+v, %v", got, err)
	}
	for _, bad := range []string{"ads", "=2", "ads=0", "ads=-1", "ads=x", "ads=NaN"} {
		if _, err := client.ParseWeights([]string{bad}); err == nil || !strings.Contains(err.Error(), bad) {
			t.Errorf("ParseWeights(%q) = %v, want an error naming it", bad, err)
		}
	}
	// Finite and within the range: 1e308 was accepted, x=Inf answered
	// with Go's "json: unsupported value: +Inf".
	for bad, want := range map[string]string{
		"x=Inf": `"x=Inf": weight +Inf: want a number from 1e-06 to 1e+06`, "x=1e308": "weight 1e+308: want a number from 1e-06 to 1e+06",
		"x=-Inf": "weight -Inf", "x=1e-9": "weight 1e-09: want",
	} {
		if _, err := client.ParseWeights([]string{bad}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseWeights(%q) = %v, want %q", bad, err, want)
		}
	}
	if got, err := client.ParseWeights([]string{"a=1e6", "b=0.000001"}); err != nil || got[0].Weight != 1e6 {
		t.Errorf("ParseWeights at the bounds = %+v, %v", got, err)
	}
}
