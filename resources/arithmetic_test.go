package resources

import (
	"testing"
)

func TestAdd(t *testing.T) {
	tests := []struct {
		a, b, want string
	}{
		{"", "", ""},
		{"cpus:1", "", "cpus:1"},
		{"", "cpus:1", "cpus:1"},
		{"cpus:0.1", "cpus:0.2", "cpus:0.3"},
		{"cpus:1;mem:512", "mem:512;disk:10", "cpus:1;disk:10;mem:1024"},
		{"cpus:1", "cpus(hdfs):1", "cpus:1;cpus(hdfs):1"},
		{"cpus(hdfs):1", "cpus(hdfs,alice):1", "cpus(hdfs):1;cpus(hdfs,alice):1"},
		{"cpus(hdfs,alice):1", "cpus(hdfs,bob):1", "cpus(hdfs,alice):1;cpus(hdfs,bob):1"},
		{"cpus(hdfs,alice):1", "cpus(hdfs,alice):2", "cpus(hdfs,alice):3"},
		{"cpus:1", "cpus{REV}:1", "cpus:1;cpus{REV}:1"},
		{"ports:[1-10]", "ports:[11-20]", "ports:[1-20]"},
		{"ports:[1-10]", "ports:[5-30]", "ports:[1-30]"},
		{"ports:[1-10,30-40]", "ports:[12-20]", "ports:[1-10,12-20,30-40]"},
		{"ports:[1-10]", "ports(web):[1-10]", "ports:[1-10];ports(web):[1-10]"},
		{"disks:{a,c}", "disks:{b,c}", "disks:{a,b,c}"},
	}
	for _, tt := range tests {
		a, b := MustParse(tt.a), MustParse(tt.b)
		as, bs := a.String(), b.String()
		got := a.Add(b)
		if got.String() != tt.want {
			t.Errorf("(%s).Add(%s) = %s, want %s", tt.a, tt.b, got, tt.want)
		}
		if !got.isNormalized() {
			t.Errorf("(%s).Add(%s) = %#v is not normalized", tt.a, tt.b, got)
		}
		if a.String() != as || b.String() != bs {
			t.Errorf("(%s).Add(%s) mutated an operand", tt.a, tt.b)
		}
		if got2 := b.Add(a); !got2.Equal(got) {
			t.Errorf("Add is not commutative: %s vs %s", got, got2)
		}
	}
}

func TestAddSaturates(t *testing.T) {
	a := Resources{{Name: "cpus", Scalar: MaxValue - 5, Role: "*"}}
	if got := a.Add(MustParse("cpus:1")).CPUs(); got != MaxValue {
		t.Errorf("saturating Add = %v, want MaxValue", got)
	}
}

func TestAddDoesNotAlias(t *testing.T) {
	a := MustParse("ports:[1-10];disks:{a}")
	sum := a.Add(nil)
	// Appending to a shared result must not write into a's storage.
	sum = append(sum, Resource{Name: "zzz", Scalar: 1, Role: "*"})
	sum[0].Set = append(sum[0].Set, "b")
	if a.String() != "disks:{a};ports:[1-10]" {
		t.Errorf("appending to a result changed the operand: %s", a)
	}
	_ = sum
}

func TestSubtract(t *testing.T) {
	tests := []struct {
		a, b, want string
	}{
		{"", "", ""},
		{"cpus:1", "", "cpus:1"},
		{"", "cpus:1", ""},
		{"cpus:0.3", "cpus:0.1", "cpus:0.2"},
		{"cpus:1", "cpus:1", ""},
		{"cpus:1", "cpus:2", ""}, // never negative
		{"cpus:1;mem:1024", "mem:24;disk:5", "cpus:1;mem:1000"},
		{"cpus:2;cpus(hdfs):2", "cpus(hdfs):1", "cpus:2;cpus(hdfs):1"},
		{"cpus(hdfs):2", "cpus:1", "cpus(hdfs):2"},             // other role untouched
		{"cpus(hdfs):2", "cpus(hdfs,alice):1", "cpus(hdfs):2"}, // static vs dynamic
		{"cpus(hdfs,alice):2", "cpus(hdfs,bob):1", "cpus(hdfs,alice):2"},
		{"cpus:2", "cpus{REV}:1", "cpus:2"},
		{"ports:[1-100]", "ports:[10-20,50,90-200]", "ports:[1-9,21-49,51-89]"},
		{"ports:[1-10,20-30]", "ports:[5-25]", "ports:[1-4,26-30]"},
		{"ports:[1-10]", "ports:[1-10]", ""},
		{"ports:[1-10]", "ports:[0-18446744073709551615]", ""},
		{"ports:[0-18446744073709551615]", "ports:[1-18446744073709551614]", "ports:[0-0,18446744073709551615-18446744073709551615]"},
		{"disks:{a,b,c}", "disks:{b,d}", "disks:{a,c}"},
		{"disks:{a}", "disks:{a}", ""},
	}
	for _, tt := range tests {
		a, b := MustParse(tt.a), MustParse(tt.b)
		as, bs := a.String(), b.String()
		got := a.Subtract(b)
		if got.String() != tt.want {
			t.Errorf("(%s).Subtract(%s) = %s, want %s", tt.a, tt.b, got, tt.want)
		}
		if !got.isNormalized() {
			t.Errorf("(%s).Subtract(%s) = %#v is not normalized", tt.a, tt.b, got)
		}
		if a.String() != as || b.String() != bs {
			t.Errorf("(%s).Subtract(%s) mutated an operand", tt.a, tt.b)
		}
	}
}

func TestContains(t *testing.T) {
	tests := []struct {
		a, b string
		want bool
	}{
		{"", "", true},
		{"cpus:1", "", true},
		{"", "cpus:1", false},
		{"cpus:1", "cpus:1", true},
		{"cpus:1", "cpus:1.001", false},
		{"cpus:1;mem:10", "mem:10", true},
		{"cpus:1;mem:10", "mem:10;disk:1", false},
		{"cpus:1", "cpus(hdfs):1", false},
		{"cpus(hdfs):1", "cpus:1", false},
		{"cpus(hdfs):1", "cpus(hdfs,alice):1", false},
		{"cpus(hdfs,alice):1", "cpus(hdfs,alice):1", true},
		{"cpus{REV}:1", "cpus:1", false},
		{"cpus:1", "cpus{REV}:1", false},
		{"ports:[1-100]", "ports:[1-1,50-60,100]", true},
		{"ports:[1-10,12-20]", "ports:[9-13]", false},
		{"ports:[1-10,11-20]", "ports:[9-13]", true}, // merged by Parse
		{"ports:[5-10]", "ports:[4]", false},
		{"ports:[5-10]", "ports:[11]", false},
		{"disks:{a,b}", "disks:{b}", true},
		{"disks:{a,b}", "disks:{c}", false},
	}
	for _, tt := range tests {
		if got := MustParse(tt.a).Contains(MustParse(tt.b)); got != tt.want {
			t.Errorf("(%s).Contains(%s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestContainsUnnormalized(t *testing.T) {
	a := Resources{
		{Name: "ports", Type: Ranges, Ranges: []Range{{11, 20}, {1, 10}}},
		{Name: "cpus", Scalar: 500},
		{Name: "cpus", Scalar: 500},
	}
	if !a.Contains(MustParse("cpus:1;ports:[5-15]")) {
		t.Errorf("%v does not contain cpus:1;ports:[5-15]", a)
	}
}

func TestEqual(t *testing.T) {
	tests := []struct {
		a    Resources
		b    string
		want bool
	}{
		{nil, "", true},
		{Resources{}, "", true},
		{Resources{{Name: "cpus", Scalar: 0}}, "", true},
		{Resources{{Name: "cpus", Scalar: 1000}}, "cpus:1", true},
		{Resources{{Name: "cpus", Scalar: 1000, Role: "*"}}, "cpus:1", true},
		{Resources{{Name: "cpus", Scalar: 1000}}, "cpus:2", false},
		{Resources{{Name: "cpus", Scalar: 1000}}, "cpus(r):1", false},
		{Resources{{Name: "cpus", Scalar: 1000, Role: "r"}}, "cpus(r,p):1", false},
		{Resources{{Name: "cpus", Scalar: 1000, Role: "r", Reservation: &Reservation{"q"}}}, "cpus(r,p):1", false},
		{Resources{{Name: "cpus", Scalar: 1000, Revocable: true}}, "cpus:1", false},
		{Resources{{Name: "cpus", Scalar: 1000}}, "mem:1", false},
		{Resources{{Name: "p", Type: Ranges, Ranges: []Range{{3, 4}, {1, 2}}}}, "p:[1-4]", true},
		{Resources{{Name: "p", Type: Ranges, Ranges: []Range{{1, 2}}}}, "p:[1-3]", false},
		{Resources{{Name: "s", Type: Set, Set: []string{"b", "a", "a"}}}, "s:{a,b}", true},
		{Resources{{Name: "s", Type: Set, Set: []string{"b"}}}, "s:{a}", false},
		{Resources{{Name: "cpus", Scalar: 1000}}, "cpus:1;mem:1", false},
	}
	for _, tt := range tests {
		b := MustParse(tt.b)
		if got := tt.a.Equal(b); got != tt.want {
			t.Errorf("(%#v).Equal(%s) = %v, want %v", tt.a, tt.b, got, tt.want)
		}
		if got := b.Equal(tt.a); got != tt.want {
			t.Errorf("(%s).Equal(%#v) = %v, want %v", tt.b, tt.a, got, tt.want)
		}
	}
}

func TestIsEmpty(t *testing.T) {
	tests := []struct {
		r    Resources
		want bool
	}{
		{nil, true},
		{Resources{{Name: "cpus"}}, true},
		{Resources{{Name: "cpus", Scalar: -1}}, true},
		{Resources{{Name: "p", Type: Ranges}}, true},
		{Resources{{Name: "s", Type: Set}}, true},
		{MustParse("cpus:0.001"), false},
		{MustParse("p:[1]"), false},
		{MustParse("s:{a}"), false},
	}
	for _, tt := range tests {
		if got := tt.r.IsEmpty(); got != tt.want {
			t.Errorf("(%#v).IsEmpty() = %v, want %v", tt.r, got, tt.want)
		}
	}
}

func TestNormalizedDropsInvalidShapes(t *testing.T) {
	r := Resources{
		{Name: "cpus", Scalar: -1000},
		{Name: "mem", Scalar: 1000, Ranges: []Range{{1, 2}}},
		{Name: "ports", Type: Ranges, Ranges: []Range{{9, 1}, {3, 4}}},
	}
	if got, want := r.String(), "mem:1;ports:[3-4]"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}
