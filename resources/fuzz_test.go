package resources

import (
	"errors"
	"testing"
)

// FuzzParse checks that Parse never panics, that every error it returns is
// a *ParseError wrapping ErrInvalid, and that whatever parses formats to
// canonical text that parses back to an Equal value and formats the same.
// The seeds (and testdata/fuzz/FuzzParse) run in the normal test suite.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		"",
		";",
		"cpus:2;mem:1024;disk:512;ports:[31000-32000];cpus(hdfs):1",
		"cpus:6;mem:18432;disk:10240;ports:[31000-32000];cpus(hdfs):2;mem(hdfs):6144",
		" cpus : 1.5 ; mem(r1 , alice) : 0.001 ",
		"cpus{REV}:0.5;mem{REV}:128",
		"cpus(*){REV}:1",
		"cpus(hdfs,alice):2;cpus(hdfs):1;cpus:1",
		"ports:[80,443,8000-8080];ports:[1-79]",
		"ports:[0-18446744073709551615]",
		"ports:[]",
		"disks:{sda,sdb};disks:{sdc}",
		"disks:{}",
		"net_bw:1000;gpus/nvidia.com:1",
		"cpus:9223372036854775.807;cpus:1",
		"cpus:.5;cpus:3.;cpus:+1",
		// Invalid inputs exercise the error paths.
		"cpu:abc",
		"cpus:1;cpus:[1-2]",
		"cpus(hdfs){REV}:1",
		"ports:[1-10];ports:[5-6]",
		"cpus:0.0001",
		"cpus(,):1",
		"disks:{a,a}",
		// More than smallList entries: the map-based merge path.
		"a:1;b:1;c:1;d:1;e:1;f:1;g:1;h:1;i:1;j:1;k:1;l:1;m:1;n:1;o:1;p:1;q:1;r:1;" +
			"a(x):1;ports:[5];ports:[1-3];ports(x,y):[9];disks:{b};disks:{a};a:0.5;q:[1]",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		r, err := Parse(text)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error %v (%T) is not a *ParseError wrapping ErrInvalid", text, err, err)
			}
			return
		}
		if !r.isNormalized() {
			t.Fatalf("Parse(%q) = %#v is not normalized", text, r)
		}
		if err := r.Validate(); err != nil {
			t.Fatalf("Parse(%q) = %s does not validate: %v", text, r, err)
		}
		canon := r.String()
		back, err := Parse(canon)
		if err != nil {
			t.Fatalf("Parse(%q) = %#v formats to %q which does not parse: %v", text, r, canon, err)
		}
		if !back.Equal(r) {
			t.Fatalf("round trip of %q: %q parses to %s", text, canon, back)
		}
		if again := back.String(); again != canon {
			t.Fatalf("String is not canonical for %q: %q then %q", text, canon, again)
		}
		// Arithmetic on anything that parses must stay consistent.
		if !r.Add(r).Contains(r) || !r.Subtract(r).IsEmpty() || !r.Contains(r) {
			t.Fatalf("arithmetic inconsistent for %s", r)
		}
	})
}

// FuzzArithmetic checks the algebra of Add, Subtract, Contains and Equal on
// any two values that parse.
func FuzzArithmetic(f *testing.F) {
	seeds := [][2]string{
		{"cpus:1;mem:1024", "cpus:0.5"},
		{"cpus:1", "cpus:2"},
		{"ports:[1-100]", "ports:[10-20,50,90-200]"},
		{"ports:[0-18446744073709551615]", "ports:[1-18446744073709551614]"},
		{"disks:{a,b,c}", "disks:{b,d}"},
		{"cpus(hdfs,alice):2;cpus(hdfs):1", "cpus(hdfs):1;cpus{REV}:1"},
		{"cpus:9223372036854775.807", "cpus:1"},
		{"cpus:1", "cpus:[1-2]"},
	}
	for _, s := range seeds {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, sa, sb string) {
		a, errA := Parse(sa)
		b, errB := Parse(sb)
		if errA != nil || errB != nil {
			return
		}
		sum, diff := a.Add(b), a.Subtract(b)
		for _, r := range []Resources{sum, diff} {
			if !r.isNormalized() {
				t.Fatalf("a=%s b=%s: result %#v is not normalized", a, b, r)
			}
			if r.Validate() != nil {
				continue // a and b use one name with two types
			}
			if back, err := Parse(r.String()); err != nil || !back.Equal(r) {
				t.Fatalf("a=%s b=%s: result %s does not round-trip: %v", a, b, r, err)
			}
		}
		if !sum.Contains(a) || !sum.Contains(b) {
			t.Fatalf("a=%s b=%s: a+b=%s does not contain both", a, b, sum)
		}
		if !sum.Equal(b.Add(a)) {
			t.Fatalf("a=%s b=%s: a+b != b+a", a, b)
		}
		if !a.Contains(diff) {
			t.Fatalf("a=%s b=%s: a does not contain a-b=%s", a, b, diff)
		}
		if !diff.Add(b).Contains(a) {
			t.Fatalf("a=%s b=%s: (a-b)+b does not contain a", a, b)
		}
		if a.Contains(b) {
			if got := diff.Add(b); !got.Equal(a) {
				t.Fatalf("a=%s b=%s: a contains b but (a-b)+b = %s", a, b, got)
			}
		}
		if (a.Contains(b) && b.Contains(a)) != a.Equal(b) {
			t.Fatalf("a=%s b=%s: mutual containment differs from Equal", a, b)
		}
		if !sum.Subtract(sum).IsEmpty() {
			t.Fatalf("a=%s b=%s: (a+b)-(a+b) not empty", a, b)
		}
	})
}
