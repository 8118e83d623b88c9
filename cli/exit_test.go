package cli

import (
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/brimnode/brim/masterlink"
)

func TestMasterRefusalOfAgent(t *testing.T) {
	rejected := fmt.Errorf("master m refused the agent: %w: %w", masterlink.ErrRejected,
		fmt.Errorf("register: %w", status.Error(codes.Unauthenticated, `agent authentication: bad credentials for "a1": wrong secret`)))
	var ee ExitError
	if err := MasterRefusal("agent", rejected); !errors.As(err, &ee) || ee.Code != 1 ||
		ee.Msg != `the master refused the agent: unauthenticated: agent authentication: bad credentials for "a1": wrong secret` {
		t.Fatalf("refusal: %#v", err)
	}
	for _, err := range []error{nil, errors.New("dial: boom"), status.Error(codes.Unavailable, "down")} {
		if got := MasterRefusal("agent", err); got != err {
			t.Fatalf("refusal of %v: %#v", err, got)
		}
	}
}
