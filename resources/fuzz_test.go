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
