package client

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

func TestExplainTLS(t *testing.T) {
	ctx := context.Background()
	dial := errors.New("connection closed")
	tlsSrv := httptest.NewTLSServer(http.NotFoundHandler())
	defer tlsSrv.Close()
	plain := httptest.NewServer(http.NotFoundHandler())
	defer plain.Close()

	explain := ExplainTLS(strings.TrimPrefix(tlsSrv.URL, "https://"))
	for range 2 { // probed once, the answer kept
		if err := explain(ctx, dial); !errors.Is(err, ErrServesTLS) || !errors.Is(err, dial) {
			t.Errorf("TLS master: %v", err)
		}
	}
	if err := ExplainTLS(strings.TrimPrefix(plain.URL, "http://"))(ctx, dial); err != dial {
		t.Errorf("plain master: %v, want the error unchanged", err)
	}
}
