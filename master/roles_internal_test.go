package master

import (
	"errors"
	"strings"
	"testing"
)

// An agent offering resources reserved for a role over MaxRoleBytes is
// refused like any other entry of a role.
func TestRegisterAgentRoleLimit(t *testing.T) {
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("r", MaxRoleBytes+1)
	reg := &Registration{Hostname: "h", Resources: "cpus:3;mem:1024;cpus(" + long + "):1"}
	_, _, err = m.registerAgent(reg, "", NewOutbox[ToAgent](func() {}, AgentQueue))
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "255-byte limit") {
		t.Fatalf("register an agent with a long role: %.200v, want ErrInvalid naming the limit", err)
	}
	if len(m.State().Agents) != 0 {
		t.Fatal("the refused agent is registered")
	}
}
