package resources

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	alice := &Reservation{Principal: "alice"}
	tests := []struct {
		in   string
		want Resources
	}{
		{"", nil},
		{"  ;; ", nil},
		{"cpus:2", Resources{{Name: "cpus", Scalar: 2000, Role: "*"}}},
		{" cpus : 1.5 ; ", Resources{{Name: "cpus", Scalar: 1500, Role: "*"}}},
		{"cpus:0", nil},
		{"cpus:1;cpus:0.5", Resources{{Name: "cpus", Scalar: 1500, Role: "*"}}},
		{"mem:1024;cpus:2", Resources{
			{Name: "cpus", Scalar: 2000, Role: "*"},
			{Name: "mem", Scalar: 1024000, Role: "*"},
		}},
		{"cpus(*):1", Resources{{Name: "cpus", Scalar: 1000, Role: "*"}}},
		{"cpus(hdfs):1", Resources{{Name: "cpus", Scalar: 1000, Role: "hdfs"}}},
		{"cpus( hdfs , alice ):2", Resources{{Name: "cpus", Scalar: 2000, Role: "hdfs", Reservation: alice}}},
		{"cpus{REV}:0.5", Resources{{Name: "cpus", Scalar: 500, Role: "*", Revocable: true}}},
		{"cpus(*){REV}:0.5", Resources{{Name: "cpus", Scalar: 500, Role: "*", Revocable: true}}},
		{"ports:[31000-32000]", Resources{{Name: "ports", Type: Ranges, Role: "*", Ranges: []Range{{31000, 32000}}}}},
		{"ports:[ 80 , 443-443, 8000 - 8080 ]", Resources{{Name: "ports", Type: Ranges, Role: "*",
			Ranges: []Range{{80, 80}, {443, 443}, {8000, 8080}}}}},
		{"ports:[5-6,1-4]", Resources{{Name: "ports", Type: Ranges, Role: "*", Ranges: []Range{{1, 6}}}}},
		{"ports:[1-2];ports:[3-10]", Resources{{Name: "ports", Type: Ranges, Role: "*", Ranges: []Range{{1, 10}}}}},
		{"ports:[]", nil},
		{"ports:[0-18446744073709551615]", Resources{{Name: "ports", Type: Ranges, Role: "*",
			Ranges: []Range{{0, 18446744073709551615}}}}},
		{"disks:{sdb, sda}", Resources{{Name: "disks", Type: Set, Role: "*", Set: []string{"sda", "sdb"}}}},
		{"disks:{a};disks:{c,b}", Resources{{Name: "disks", Type: Set, Role: "*", Set: []string{"a", "b", "c"}}}},
		{"disks:{}", nil},
		{"cpus:2;cpus(hdfs):1;cpus(hdfs,alice):3;cpus{REV}:1", Resources{
			{Name: "cpus", Scalar: 2000, Role: "*"},
			{Name: "cpus", Scalar: 1000, Role: "*", Revocable: true},
			{Name: "cpus", Scalar: 1000, Role: "hdfs"},
			{Name: "cpus", Scalar: 3000, Role: "hdfs", Reservation: alice},
		}},
		// The same ports for two roles are two entries, not an overlap.
		{"ports:[1-10];ports(hdfs):[5-6]", Resources{
			{Name: "ports", Type: Ranges, Role: "*", Ranges: []Range{{1, 10}}},
			{Name: "ports", Type: Ranges, Role: "hdfs", Ranges: []Range{{5, 6}}},
		}},
		{"gpus/nvidia.com-x_1:1", Resources{{Name: "gpus/nvidia.com-x_1", Scalar: 1000, Role: "*"}}},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err != nil {
			t.Errorf("Parse(%q): %v", tt.in, err)
			continue
		}
		if !identical(got, tt.want) {
			t.Errorf("Parse(%q) = %#v, want %#v", tt.in, got, tt.want)
		}
	}
}

// identical compares field by field (Equal normalizes, this does not), so
// Parse is checked to return the normal form.
func identical(a, b Resources) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		x, y := a[i], b[i]
		if x.Name != y.Name || x.Type != y.Type || x.Scalar != y.Scalar || x.Role != y.Role ||
			x.Revocable != y.Revocable || !slices.Equal(x.Ranges, y.Ranges) || !slices.Equal(x.Set, y.Set) ||
			(x.Reservation == nil) != (y.Reservation == nil) ||
			(x.Reservation != nil && *x.Reservation != *y.Reservation) {
			return false
		}
	}
	return true
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in      string
		token   string
		reason  string // substring
		wantErr error  // besides ErrInvalid
	}{
		{"cpu:abc", "cpu:abc", `invalid scalar "abc"`, nil},
		{"cpus:1;mem:x", "mem:x", `invalid scalar "x"`, nil},
		{"cpus", "cpus", "missing ':'", nil},
		{":1", ":1", "empty name", nil},
		{"(hdfs):1", "(hdfs):1", "empty name", nil},
		{"cp us:1", "cp us:1", `invalid name "cp us"`, nil},
		{"cpus:-1", "cpus:-1", "negative", nil},
		{"cpus:NaN", "cpus:NaN", "invalid scalar", nil},
		{"cpus:Inf", "cpus:Inf", "invalid scalar", nil},
		{"cpus:1e3", "cpus:1e3", "invalid scalar", nil},
		{"cpus:0.0005", "cpus:0.0005", "more than 3 decimal places", nil},
		{"cpus:", "cpus:", "invalid scalar", nil},
		{"cpus():1", "cpus():1", "empty role", nil},
		{"cpus(.):1", "cpus(.):1", "invalid role", nil},
		{"cpus(..):1", "cpus(..):1", "invalid role", nil},
		{"cpus(-x):1", "cpus(-x):1", "starts with '-'", nil},
		{"cpus(a/b):1", "cpus(a/b):1", "invalid role", nil},
		{"cpus(a b):1", "cpus(a b):1", "invalid role", nil},
		{"cpus(a*):1", "cpus(a*):1", "invalid role", nil},
		{"cpus(hdfs:1", "cpus(hdfs:1", "missing ')'", nil},
		{"cpus(hdfs,):1", "cpus(hdfs,):1", "invalid principal", nil},
		{"cpus(hdfs,a b):1", "cpus(hdfs,a b):1", "invalid principal", nil},
		{"cpus(*,alice):1", "cpus(*,alice):1", "dynamic reservation without a role", nil},
		{"cpus(hdfs){REV}:1", "cpus(hdfs){REV}:1", "revocable", ErrRevocableReservation},
		{"cpus{REV}(hdfs):1", "cpus{REV}(hdfs):1", "unexpected", nil},
		{"cpus{rev}:1", "cpus{rev}:1", "unexpected", nil},
		{"cpus:1;cpus:[1-2]", "cpus:[1-2]", "already given as scalar", nil},
		{"ports:[1-2];ports:{a}", "ports:{a}", "already given as ranges", nil},
		{"ports:[1-2", "ports:[1-2", "missing ']'", nil},
		{"ports:[2-1]", "ports:[2-1]", `invalid range "2-1"`, nil},
		{"ports:[1-2-3]", "ports:[1-2-3]", "invalid range", nil},
		{"ports:[a]", "ports:[a]", "invalid range", nil},
		{"ports:[1,]", "ports:[1,]", `invalid range ""`, nil},
		{"ports:[-1]", "ports:[-1]", "invalid range", nil},
		{"ports:[1-18446744073709551616]", "ports:[1-18446744073709551616]", "invalid range", nil},
		{"ports:[1-10,5-6]", "ports:[1-10,5-6]", "overlapping ranges 1-10 and 5-6", nil},
		{"ports:[1-10]; ports:[10-12]", "ports:[10-12]", "overlaps 1-10", nil},
		{"cpus:9223372036854775.807;cpus:0.001", "cpus:0.001", `sum of "cpus" out of range`, nil},
		{"disks:{a,b", "disks:{a,b", "missing '}'", nil},
		{"disks:{a,a}", "disks:{a,a}", "duplicate set item", nil},
		{"disks:{a};disks:{a}", "disks:{a}", "given earlier", nil},
		{"disks:{a,}", "disks:{a,}", "invalid set item", nil},
		{"disks:{a b}", "disks:{a b}", "invalid set item", nil},
		{"disks:{a(b}", "disks:{a(b}", "invalid set item", nil},
	}
	for _, tt := range tests {
		got, err := Parse(tt.in)
		if err == nil {
			t.Errorf("Parse(%q) = %v, want error", tt.in, got)
			continue
		}
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Errorf("Parse(%q) error %T is not *ParseError", tt.in, err)
			continue
		}
		if pe.Token != tt.token {
			t.Errorf("Parse(%q) token = %q, want %q", tt.in, pe.Token, tt.token)
		}
		if !strings.Contains(pe.Reason, tt.reason) {
			t.Errorf("Parse(%q) reason = %q, want it to contain %q", tt.in, pe.Reason, tt.reason)
		}
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%q) error does not wrap ErrInvalid", tt.in)
		}
		if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
			t.Errorf("Parse(%q) error does not wrap %v", tt.in, tt.wantErr)
		}
		if got != nil {
			t.Errorf("Parse(%q) returned %v with an error", tt.in, got)
		}
	}
}

func TestParseErrorMessage(t *testing.T) {
	_, err := Parse("cpu:abc")
	if want := `resource "cpu:abc": invalid scalar "abc"`; err == nil || err.Error() != want {
		t.Fatalf("Parse error = %v, want %s", err, want)
	}
}

func TestMustParsePanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Error("MustParse of invalid text did not panic")
		}
	}()
	MustParse("cpus:x")
}

func TestString(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"mem:1024;cpus:2;disk:512;ports:[31000-32000];cpus(hdfs):1",
			"cpus:2;cpus(hdfs):1;disk:512;mem:1024;ports:[31000-32000]"},
		{"cpus{REV}:0.5;cpus(hdfs,alice):1;cpus(hdfs):2;cpus(a):1;cpus:1",
			"cpus:1;cpus{REV}:0.5;cpus(a):1;cpus(hdfs):2;cpus(hdfs,alice):1"},
		{"ports:[80];ports:[81-90,100]", "ports:[80-90,100-100]"},
		{"disks:{z,a}", "disks:{a,z}"},
		{"cpus:0.100", "cpus:0.1"},
	}
	for _, tt := range tests {
		r := MustParse(tt.in)
		if got := r.String(); got != tt.want {
			t.Errorf("Parse(%q).String() = %q, want %q", tt.in, got, tt.want)
		}
		if back := MustParse(r.String()); !back.Equal(r) {
			t.Errorf("round trip of %q: got %v", tt.in, back)
		}
	}
}

func TestStringUnnormalized(t *testing.T) {
	r := Resources{
		{Name: "mem", Scalar: 512000},
		{Name: "cpus", Scalar: 500},
		{Name: "cpus", Scalar: 500},
		{Name: "cpus", Scalar: 0, Role: "x"},
		{Name: "ports", Type: Ranges, Ranges: []Range{{5, 9}, {1, 4}}},
	}
	if got, want := r.String(), "cpus:1;mem:512;ports:[1-9]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if r[1].Scalar != 500 || r[4].Ranges[0] != (Range{5, 9}) || r[0].Role != "" {
		t.Errorf("String mutated its receiver: %#v", r)
	}
}

func TestResourceString(t *testing.T) {
	tests := []struct {
		r    Resource
		want string
	}{
		{Resource{Name: "cpus", Scalar: 1500}, "cpus:1.5"},
		{Resource{Name: "cpus", Scalar: 1500, Role: "r", Reservation: &Reservation{"p"}}, "cpus(r,p):1.5"},
		{Resource{Name: "cpus", Scalar: 1, Revocable: true}, "cpus{REV}:0.001"},
		{Resource{Name: "ports", Type: Ranges, Ranges: []Range{{1, 2}, {4, 4}}}, "ports:[1-2,4-4]"},
		{Resource{Name: "d", Type: Set, Set: []string{"a", "b"}}, "d:{a,b}"},
		{Resource{Name: "x", Type: Type(9)}, "x:?"},
	}
	for _, tt := range tests {
		if got := tt.r.String(); got != tt.want {
			t.Errorf("%#v.String() = %q, want %q", tt.r, got, tt.want)
		}
	}
}

func TestTypeString(t *testing.T) {
	for typ, want := range map[Type]string{Scalar: "scalar", Ranges: "ranges", Set: "set", Type(7): "Type(7)"} {
		if got := typ.String(); got != want {
			t.Errorf("Type(%d).String() = %q, want %q", int(typ), got, want)
		}
	}
}
