package master

import (
	"errors"
	"testing"

	"github.com/brimnode/brim/master/allocator"
	"github.com/brimnode/brim/resources"
)

func TestValidateQuota(t *testing.T) {
	q := func(g, l string) allocator.Quota {
		return allocator.Quota{Guarantee: resources.MustParse(g), Limit: resources.MustParse(l)}
	}
	for _, tc := range []struct {
		name string
		q    allocator.Quota
		ok   bool
	}{
		{"empty (remove)", q("", ""), true},
		{"guarantee and limit", q("cpus:1;mem:512", "cpus:2"), true},
		{"guarantee equal to limit", q("cpus:2", "cpus:2"), true},
		{"limit without guarantee", q("", "mem:1024"), true},
		{"guarantee above limit", q("cpus:3", "cpus:2"), false},
		{"reserved", q("cpus(ads):1", ""), false},
		{"revocable", q("", "cpus{REV}:1"), false},
		{"ranges", q("", "ports:[1-2]"), false},
	} {
		err := validateQuota(tc.q)
		if tc.ok && err != nil {
			t.Errorf("%s: %v", tc.name, err)
		}
		if !tc.ok && !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", tc.name, err)
		}
	}
}
