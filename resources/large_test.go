package resources

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// TestLargeText covers the map-based paths Parse, Validate and ValidateTask
// take for long lists, with the same errors as the short paths.
func TestLargeText(t *testing.T) {
	var sb strings.Builder
	for i := range 200 {
		fmt.Fprintf(&sb, "r%d:1;r%d(role):2;", i, i)
	}
	sb.WriteString("r7:0.5;ports:[1];ports:[3];ports:[2];disks:{b};disks:{a}")
	r, err := Parse(sb.String())
	if err != nil {
		t.Fatalf("Parse: %v", err)
	}
	if len(r) != 402 || r.Scalar("r7") != 3500 {
		t.Errorf("Parse gave %d entries and r7=%v, want 402 and 3.5", len(r), r.Scalar("r7"))
	}
	if got := r.Filter(func(e Resource) bool { return e.Type != Scalar }).String(); got != "disks:{a,b};ports:[1-3]" {
		t.Errorf("ranges and sets = %q", got)
	}
	if err := ValidateTask(r); err != nil {
		t.Errorf("ValidateTask: %v", err)
	}
	if back := MustParse(r.String()); !back.Equal(r) {
		t.Error("long value does not round-trip")
	}

	errTests := []struct{ suffix, token, reason string }{
		{";r150:[1-2]", "r150:[1-2]", "already given as scalar"},
		{";r150(role):{a}", "r150(role):{a}", "already given as scalar"},
		{";ports:[2-5]", "ports:[2-5]", "range 2-5 overlaps 2-2 given earlier"},
		{";disks:{a}", "disks:{a}", `set item "a" given earlier`},
		{";r3:9223372036854775.807", "r3:9223372036854775.807", "out of range"},
	}
	for _, tt := range errTests {
		_, err := Parse(sb.String() + tt.suffix)
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Token != tt.token || !strings.Contains(pe.Reason, tt.reason) {
			t.Errorf("Parse(...%s) = %v, want token %q and reason %q", tt.suffix, err, tt.token, tt.reason)
		}
	}

	conflict := append(r[:len(r):len(r)], Resource{Name: "r150", Type: Set, Set: []string{"x"}})
	if err := conflict.Validate(); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "conflicts") {
		t.Errorf("Validate of a long list with a type conflict = %v", err)
	}
	mixed := append(r[:len(r):len(r)], Resource{Name: "r150", Scalar: 1, Revocable: true})
	if err := ValidateTask(mixed); !errors.Is(err, ErrMixedRevocable) {
		t.Errorf("ValidateTask of a long mixed list = %v", err)
	}
}
