package resources

import (
	"math"
	"slices"
)

// Resources is a list of resources. Values built by this package are
// normalized: one entry per (name, type, role, reservation, revocable),
// sorted canonically, ranges sorted and merged, set items sorted and unique,
// empty entries (zero scalars, no ranges, no items) dropped. Methods accept
// any Resources (a literal need not be normalized) and never mutate the
// receiver or their arguments.
//
// A Resources is an immutable value: results may share Ranges, Set and
// Reservation storage with inputs, so never modify an element in place
// (build a new Resources instead). Safe for concurrent reads.
type Resources []Resource

// isNormalized reports whether r is already in normal form, so hot paths
// can skip copying.
func (r Resources) isNormalized() bool {
	for i := range r {
		e := &r[i]
		if e.Role == "" || e.isEmpty() {
			return false
		}
		switch e.Type {
		case Scalar:
			if len(e.Ranges) != 0 || len(e.Set) != 0 {
				return false
			}
		case Ranges:
			if e.Scalar != 0 || len(e.Set) != 0 || !rangesNormalized(e.Ranges) {
				return false
			}
		case Set:
			if e.Scalar != 0 || len(e.Ranges) != 0 || !setNormalized(e.Set) {
				return false
			}
		}
		if i > 0 && compareKey(&r[i-1], e) >= 0 {
			return false
		}
	}
	return true
}

// normalized returns r in normal form: r itself when it already is, else a
// new Resources (r is never modified). Negative scalars are dropped like
// zero ones; ranges with begin after end are dropped.
func (r Resources) normalized() Resources {
	if r.isNormalized() {
		return r
	}
	return normalizeOwned(slices.Clone(r))
}

// normalizeOwned normalizes r in place and returns it. r's elements may be
// rewritten, but the Ranges and Set arrays they point to are not: a shallow
// copy of a caller's value is safe to pass.
func normalizeOwned(r Resources) Resources {
	for i := range r {
		e := &r[i]
		if e.Role == "" {
			e.Role = Unreserved
		}
		switch e.Type {
		case Scalar:
			e.Ranges, e.Set = nil, nil
		case Ranges:
			e.Scalar, e.Set = 0, nil
			if !rangesNormalized(e.Ranges) {
				e.Ranges = unionRanges(nil, e.Ranges)
			}
		case Set:
			e.Scalar, e.Ranges = 0, nil
			if !setNormalized(e.Set) {
				e.Set = unionSet(nil, e.Set)
			}
		}
	}
	sortKeys(r)
	n := 0
	for i := range r {
		if r[i].isEmpty() {
			continue
		}
		if n > 0 && compareKey(&r[n-1], &r[i]) == 0 {
			r[n-1] = combine(&r[n-1], &r[i])
			continue
		}
		r[n] = r[i]
		n++
	}
	clear(r[n:]) // drop references for the garbage collector
	return r[:n]
}

// rangesNormalized reports whether rs is sorted, merged and valid.
func rangesNormalized(rs []Range) bool {
	for j, rg := range rs {
		if rg.Begin > rg.End {
			return false
		}
		if j > 0 && (rs[j-1].End == math.MaxUint64 || rg.Begin <= rs[j-1].End+1) {
			return false
		}
	}
	return true
}

// setNormalized reports whether s is sorted without duplicates.
func setNormalized(s []string) bool {
	for j := 1; j < len(s); j++ {
		if s[j-1] >= s[j] {
			return false
		}
	}
	return true
}

// sortKeys sorts r stably by key. Resource is large, so short lists (the
// usual case) are insertion-sorted through pointers instead of having the
// comparator copy two structs per call.
func sortKeys(r Resources) {
	if len(r) > 16 {
		slices.SortStableFunc(r, func(a, b Resource) int { return compareKey(&a, &b) })
		return
	}
	for i := 1; i < len(r); i++ {
		for j := i; j > 0 && compareKey(&r[j-1], &r[j]) > 0; j-- {
			r[j-1], r[j] = r[j], r[j-1]
		}
	}
}

// capped returns s with capacity equal to its length, so an append by a
// holder of a shared result never writes into another value's storage.
func capped[S ~[]E, E any](s S) S { return s[:len(s):len(s)] }

// combine returns a+b for two entries of the same key.
func combine(a, b *Resource) Resource {
	out := *a
	switch a.Type {
	case Scalar:
		out.Scalar = addValue(a.Scalar, b.Scalar)
	case Ranges:
		out.Ranges = unionRanges(a.Ranges, b.Ranges)
	case Set:
		out.Set = unionSet(a.Set, b.Set)
	}
	return out
}

// Add returns r + o: scalars summed, ranges and sets united. Scalars
// saturate instead of overflowing.
func (r Resources) Add(o Resources) Resources {
	a, b := r.normalized(), o.normalized()
	if len(b) == 0 {
		return capped(a)
	}
	if len(a) == 0 {
		return capped(b)
	}
	out := make(Resources, 0, len(a)+len(b))
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch c := compareKey(&a[i], &b[j]); {
		case c < 0:
			out = append(out, a[i])
			i++
		case c > 0:
			out = append(out, b[j])
			j++
		default:
			out = append(out, combine(&a[i], &b[j]))
			i++
			j++
		}
	}
	out = append(out, a[i:]...)
	out = append(out, b[j:]...)
	return out
}

// Subtract returns r - o with Mesos semantics: what o has and r lacks is
// ignored, and nothing goes negative (a scalar that would is dropped).
func (r Resources) Subtract(o Resources) Resources {
	a, b := r.normalized(), o.normalized()
	if len(a) == 0 || len(b) == 0 {
		return capped(a)
	}
	out := make(Resources, 0, len(a))
	j := 0
	for i := range a {
		for j < len(b) && compareKey(&b[j], &a[i]) < 0 {
			j++
		}
		if j == len(b) || compareKey(&b[j], &a[i]) != 0 {
			out = append(out, a[i])
			continue
		}
		e := a[i]
		switch e.Type {
		case Scalar:
			e.Scalar -= b[j].Scalar // both positive: cannot overflow
		case Ranges:
			e.Ranges = subtractRanges(e.Ranges, b[j].Ranges)
		case Set:
			e.Set = subtractSet(e.Set, b[j].Set)
		}
		if !e.isEmpty() {
			out = append(out, e)
		}
	}
	return out
}

// Contains reports whether r has everything o has, key by key: a
// reservation for one role does not satisfy a request for another, nor does
// revocable satisfy non-revocable. It does not allocate when both are
// normalized.
func (r Resources) Contains(o Resources) bool {
	a, b := r.normalized(), o.normalized()
	i := 0
	for j := range b {
		for i < len(a) && compareKey(&a[i], &b[j]) < 0 {
			i++
		}
		if i == len(a) || compareKey(&a[i], &b[j]) != 0 {
			return false
		}
		switch b[j].Type {
		case Scalar:
			if a[i].Scalar < b[j].Scalar {
				return false
			}
		case Ranges:
			if !containsRanges(a[i].Ranges, b[j].Ranges) {
				return false
			}
		case Set:
			if !containsSet(a[i].Set, b[j].Set) {
				return false
			}
		}
	}
	return true
}

// Equal reports whether r and o hold the same resources.
func (r Resources) Equal(o Resources) bool {
	a, b := r.normalized(), o.normalized()
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if compareKey(&a[i], &b[i]) != 0 || a[i].Scalar != b[i].Scalar ||
			!slices.Equal(a[i].Ranges, b[i].Ranges) || !slices.Equal(a[i].Set, b[i].Set) {
			return false
		}
	}
	return true
}

// IsEmpty reports whether r holds nothing.
func (r Resources) IsEmpty() bool {
	for i := range r {
		if !r[i].isEmpty() {
			return false
		}
	}
	return true
}

// unionRanges returns the sorted, merged union of a and b (each sorted by
// Begin; need not be merged). Invalid ranges (begin after end) are dropped.
// The result never aliases a or b.
func unionRanges(a, b []Range) []Range {
	out := make([]Range, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	out = slices.DeleteFunc(out, func(r Range) bool { return r.Begin > r.End })
	if !slices.IsSortedFunc(out, compareRange) {
		slices.SortFunc(out, compareRange)
	}
	n := 0
	for _, rg := range out {
		if n > 0 && (out[n-1].End == math.MaxUint64 || rg.Begin <= out[n-1].End+1) {
			if rg.End > out[n-1].End {
				out[n-1].End = rg.End
			}
			continue
		}
		out[n] = rg
		n++
	}
	return capped(out[:n])
}

// subtractRanges returns a - b for sorted, merged a and b.
func subtractRanges(a, b []Range) []Range {
	out := make([]Range, 0, len(a)+1)
	j := 0
	for _, rg := range a {
		cur := rg
		alive := true
		for j < len(b) && b[j].End < cur.Begin {
			j++
		}
		for k := j; k < len(b) && b[k].Begin <= cur.End; k++ {
			if b[k].Begin > cur.Begin {
				out = append(out, Range{cur.Begin, b[k].Begin - 1})
			}
			if b[k].End >= cur.End {
				alive = false
				break
			}
			cur.Begin = b[k].End + 1
		}
		if alive {
			out = append(out, cur)
		}
	}
	if len(out) == 0 {
		return nil
	}
	return capped(out)
}

// containsRanges reports whether sorted, merged a covers every range of
// sorted b.
func containsRanges(a, b []Range) bool {
	i := 0
	for _, rg := range b {
		for i < len(a) && a[i].End < rg.Begin {
			i++
		}
		if i == len(a) || a[i].Begin > rg.Begin || a[i].End < rg.End {
			return false
		}
	}
	return true
}

// unionSet returns the sorted, deduplicated union of a and b. The result
// never aliases a or b.
func unionSet(a, b []string) []string {
	out := make([]string, 0, len(a)+len(b))
	out = append(out, a...)
	out = append(out, b...)
	slices.Sort(out)
	return capped(slices.Compact(out))
}

// subtractSet returns a - b for sorted, unique a and b.
func subtractSet(a, b []string) []string {
	var out []string
	j := 0
	for _, s := range a {
		for j < len(b) && b[j] < s {
			j++
		}
		if j < len(b) && b[j] == s {
			continue
		}
		out = append(out, s)
	}
	return capped(out)
}

// containsSet reports whether sorted, unique a holds every item of b.
func containsSet(a, b []string) bool {
	i := 0
	for _, s := range b {
		for i < len(a) && a[i] < s {
			i++
		}
		if i == len(a) || a[i] != s {
			return false
		}
	}
	return true
}
