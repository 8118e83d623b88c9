package resources

import (
	"errors"
	"strings"
	"testing"
)

func TestValidate(t *testing.T) {
	valid := []Resources{
		nil,
		MustParse(mixed),
		{{Name: "cpus", Scalar: 0}},
		{{Name: "cpus", Scalar: 1000, Role: ""}},
		{{Name: "ports", Type: Ranges, Ranges: []Range{{5, 6}, {1, 4}}}},
		{{Name: "s", Type: Set, Set: []string{"b", "a"}}},
		{{Name: "cpus", Scalar: 1}, {Name: "cpus", Scalar: 1}},
	}
	for _, r := range valid {
		if err := r.Validate(); err != nil {
			t.Errorf("(%#v).Validate() = %v", r, err)
		}
	}

	tests := []struct {
		name   string
		r      Resources
		reason string
		want   error
	}{
		{"empty name", Resources{{Scalar: 1}}, "invalid name", ErrInvalid},
		{"bad name", Resources{{Name: "a:b", Scalar: 1}}, "invalid name", ErrInvalid},
		{"negative", Resources{{Name: "cpus", Scalar: -1}}, "negative scalar -0.001", ErrInvalid},
		{"scalar with ranges", Resources{{Name: "cpus", Scalar: 1, Ranges: []Range{{1, 2}}}}, "carries", ErrInvalid},
		{"ranges with scalar", Resources{{Name: "p", Type: Ranges, Scalar: 1}}, "carries", ErrInvalid},
		{"set with ranges", Resources{{Name: "s", Type: Set, Ranges: []Range{{1, 1}}}}, "carries", ErrInvalid},
		{"unknown type", Resources{{Name: "x", Type: Type(5)}}, "unknown type", ErrInvalid},
		{"begin after end", Resources{{Name: "p", Type: Ranges, Ranges: []Range{{5, 4}}}}, "begin after end", ErrInvalid},
		{"overlap", Resources{{Name: "p", Type: Ranges, Ranges: []Range{{5, 9}, {1, 5}}}}, "overlapping ranges 1-5 and 5-9", ErrInvalid},
		{"bad set item", Resources{{Name: "s", Type: Set, Set: []string{"a b"}}}, "invalid set item", ErrInvalid},
		{"duplicate set item", Resources{{Name: "s", Type: Set, Set: []string{"b", "a", "b"}}}, `duplicate set item "b"`, ErrInvalid},
		{"bad role", Resources{{Name: "cpus", Scalar: 1, Role: ".."}}, "invalid role", ErrInvalid},
		{"dynamic unreserved", Resources{{Name: "cpus", Scalar: 1, Reservation: &Reservation{"p"}}}, "without a role", ErrInvalid},
		{"bad principal", Resources{{Name: "cpus", Scalar: 1, Role: "r", Reservation: &Reservation{""}}}, "invalid principal", ErrInvalid},
		{"revocable reserved", Resources{{Name: "cpus", Scalar: 1, Role: "r", Revocable: true}}, "revocable", ErrRevocableReservation},
		{"type conflict", Resources{{Name: "cpus", Scalar: 1}, {Name: "cpus", Type: Ranges, Role: "r"}}, "conflicts", ErrInvalid},
	}
	for _, tt := range tests {
		err := tt.r.Validate()
		if err == nil {
			t.Errorf("%s: Validate() = nil", tt.name)
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || !strings.Contains(ve.Reason, tt.reason) {
			t.Errorf("%s: Validate() = %v, want a *ValidationError with reason containing %q", tt.name, err, tt.reason)
		}
		if !errors.Is(err, ErrInvalid) || !errors.Is(err, tt.want) {
			t.Errorf("%s: Validate() = %v, want it to wrap ErrInvalid and %v", tt.name, err, tt.want)
		}
	}
}

func TestValidationErrorMessage(t *testing.T) {
	err := Resources{{Name: "cpus", Scalar: -1000}}.Validate()
	if want := `resource "cpus:-1": negative scalar -1`; err == nil || err.Error() != want {
		t.Errorf("Validate() = %v, want %s", err, want)
	}
}

func TestValidateTask(t *testing.T) {
	for _, s := range []string{"", "cpus:1;mem:128", "cpus{REV}:1;mem{REV}:128", "cpus{REV}:1;mem:128", "cpus(a):1;cpus:1"} {
		if err := ValidateTask(MustParse(s)); err != nil {
			t.Errorf("ValidateTask(%s) = %v", s, err)
		}
	}
	tests := []struct {
		r    Resources
		want error
	}{
		{MustParse("cpus:1;cpus{REV}:1"), ErrMixedRevocable},
		{MustParse("cpus(a):1;mem:1;cpus{REV}:1"), ErrMixedRevocable},
		{Resources{{Name: "cpus", Scalar: -1}}, ErrInvalid},
		{Resources{{Name: "cpus", Scalar: 1, Role: "r", Revocable: true}}, ErrRevocableReservation},
	}
	for _, tt := range tests {
		err := ValidateTask(tt.r)
		if !errors.Is(err, tt.want) || !errors.Is(err, ErrInvalid) {
			t.Errorf("ValidateTask(%v) = %v, want it to wrap %v and ErrInvalid", tt.r, err, tt.want)
		}
	}
}
