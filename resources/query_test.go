package resources

import (
	"errors"
	"maps"
	"slices"
	"testing"
)

const mixed = "cpus:4;cpus{REV}:1;cpus(hdfs):2;cpus(hdfs,alice):1;cpus(web):0.5;mem:1024;mem(hdfs):512;mem{REV}:256;ports:[31000-31010];ports(web):[80]"

func TestFilters(t *testing.T) {
	r := MustParse(mixed)
	tests := []struct {
		name string
		got  Resources
		want string
	}{
		{"Revocable", r.Revocable(), "cpus{REV}:1;mem{REV}:256"},
		{"NonRevocable", r.NonRevocable(), "cpus:4;cpus(hdfs):2;cpus(hdfs,alice):1;cpus(web):0.5;mem:1024;mem(hdfs):512;ports:[31000-31010];ports(web):[80-80]"},
		{"Reserved(hdfs)", r.Reserved("hdfs"), "cpus(hdfs):2;cpus(hdfs,alice):1;mem(hdfs):512"},
		{"Reserved(web)", r.Reserved("web"), "cpus(web):0.5;ports(web):[80-80]"},
		{"Reserved(none)", r.Reserved("none"), ""},
		{"Reserved(*)", r.Reserved("*"), ""},
		{"Reserved()", r.Reserved(""), "cpus(hdfs):2;cpus(hdfs,alice):1;cpus(web):0.5;mem(hdfs):512;ports(web):[80-80]"},
		{"Unreserved", r.Unreserved(), "cpus:4;cpus{REV}:1;mem:1024;mem{REV}:256;ports:[31000-31010]"},
		{"Filter(mem)", r.Filter(func(e Resource) bool { return e.Name == "mem" }), "mem:1024;mem{REV}:256;mem(hdfs):512"},
		{"Flatten", r.Flatten(), "cpus:7.5;cpus{REV}:1;mem:1536;mem{REV}:256;ports:[80-80,31000-31010]"},
		{"Unreserve", r.Unreserve(), "cpus:5;cpus{REV}:1;cpus(hdfs):2;cpus(web):0.5;mem:1024;mem(hdfs):512;mem{REV}:256;ports:[31000-31010];ports(web):[80-80]"},
	}
	for _, tt := range tests {
		if want := MustParse(tt.want); !tt.got.Equal(want) {
			t.Errorf("%s = %s, want %s", tt.name, tt.got, want)
		}
		if !tt.got.isNormalized() {
			t.Errorf("%s = %#v is not normalized", tt.name, tt.got)
		}
	}
	if r.String() != MustParse(mixed).String() {
		t.Errorf("a query mutated its receiver: %s", r)
	}
}

func TestByRole(t *testing.T) {
	got := MustParse(mixed).ByRole()
	want := map[string]string{
		"*":    "cpus:4;cpus{REV}:1;mem:1024;mem{REV}:256;ports:[31000-31010]",
		"hdfs": "cpus(hdfs):2;cpus(hdfs,alice):1;mem(hdfs):512",
		"web":  "cpus(web):0.5;ports(web):[80]",
	}
	if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
		t.Fatalf("ByRole roles = %v, want %v", slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for role, w := range want {
		if !got[role].Equal(MustParse(w)) {
			t.Errorf("ByRole()[%q] = %s, want %s", role, got[role], w)
		}
	}
	if m := Resources(nil).ByRole(); m == nil || len(m) != 0 {
		t.Errorf("ByRole of nothing = %v, want empty map", m)
	}
}

func TestScalars(t *testing.T) {
	r := MustParse(mixed + ";disk:100.5;net_bw:1000")
	tests := []struct {
		name string
		got  Value
		want Value
	}{
		{"CPUs", r.CPUs(), 8500},
		{"Mem", r.Mem(), 1792000},
		{"Disk", r.Disk(), 100500},
		{"NetBandwidth", r.NetBandwidth(), 1000000},
		{"Scalar(gpus)", r.Scalar("gpus"), 0},
		{"Scalar(ports)", r.Scalar("ports"), 0},
		{"unnormalized", Resources{{Name: "cpus", Scalar: 100}, {Name: "cpus", Scalar: -50}, {Name: "cpus", Scalar: 100}}.CPUs(), 200},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}

func TestPorts(t *testing.T) {
	tests := []struct {
		in   string
		want []Range
	}{
		{"", nil},
		{"cpus:1", nil},
		{"ports:[31000-31010]", []Range{{31000, 31010}}},
		{mixed, []Range{{80, 80}, {31000, 31010}}},
		{"ports:[1-10];ports(a):[5-20];ports{REV}:[21]", []Range{{1, 21}}},
	}
	for _, tt := range tests {
		if got := MustParse(tt.in).Ports(); !slices.Equal(got, tt.want) {
			t.Errorf("Ports(%s) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestReserve(t *testing.T) {
	got, err := MustParse("cpus:2;mem:1024;ports:[80]").Reserve("hdfs", "alice")
	if err != nil {
		t.Fatalf("Reserve: %v", err)
	}
	if want := "cpus(hdfs,alice):2;mem(hdfs,alice):1024;ports(hdfs,alice):[80-80]"; got.String() != want {
		t.Errorf("Reserve = %s, want %s", got, want)
	}
	if !got.isNormalized() {
		t.Errorf("Reserve result %#v is not normalized", got)
	}
	if !got.Unreserve().Equal(MustParse("cpus:2;mem:1024;ports:[80]")) {
		t.Errorf("Unreserve(Reserve(r)) = %s", got.Unreserve())
	}
	if r, err := Resources(nil).Reserve("hdfs", "alice"); err != nil || !r.IsEmpty() {
		t.Errorf("Reserve of nothing = %v, %v", r, err)
	}

	errTests := []struct {
		in, role, principal string
		want                error
	}{
		{"cpus{REV}:1", "hdfs", "alice", ErrRevocableReservation},
		{"cpus(web):1", "hdfs", "alice", ErrInvalid},
		{"cpus(hdfs,bob):1", "hdfs", "alice", ErrInvalid},
		{"cpus:1", "*", "alice", ErrInvalid},
		{"cpus:1", "", "alice", ErrInvalid},
		{"cpus:1", "a/b", "alice", ErrInvalid},
		{"cpus:1", "hdfs", "", ErrInvalid},
		{"cpus:1", "hdfs", "a;b", ErrInvalid},
	}
	for _, tt := range errTests {
		r, err := MustParse(tt.in).Reserve(tt.role, tt.principal)
		if !errors.Is(err, tt.want) {
			t.Errorf("(%s).Reserve(%q, %q) = %v, %v; want error %v", tt.in, tt.role, tt.principal, r, err, tt.want)
		}
	}
}

func TestUnreserve(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"cpus(hdfs,alice):1;cpus:1", "cpus:2"},
		{"cpus(hdfs):1", "cpus(hdfs):1"},
		{"ports(a,p):[1-5];ports:[6-9]", "ports:[1-9]"},
	}
	for _, tt := range tests {
		if got := MustParse(tt.in).Unreserve(); !got.Equal(MustParse(tt.want)) {
			t.Errorf("(%s).Unreserve() = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestResourcePredicates(t *testing.T) {
	r := MustParse("cpus:1;cpus(a):1;cpus(a,p):1")
	want := [][2]bool{{false, false}, {true, false}, {true, true}}
	for i, e := range r {
		if e.IsReserved() != want[i][0] || e.IsDynamic() != want[i][1] {
			t.Errorf("%s: IsReserved=%v IsDynamic=%v, want %v", e, e.IsReserved(), e.IsDynamic(), want[i])
		}
	}
	if (Resource{Name: "cpus"}).IsReserved() {
		t.Error("a Resource with an empty role reads as reserved")
	}
}
