package allocator

// maxKinds bounds the number of distinct scalar resource names one allocator
// tracks. Fixed-size vectors keep the hot loop free of maps, strings and
// allocations; Mesos clusters use a handful of scalar names (cpus, mem,
// disk, gpus, net_bw).
const maxKinds = 8

// vec is an amount of every scalar kind, in thousandths (resources.Value).
type vec [maxKinds]int64

// mask has bit d set when dimension d is present (quota, minimum).
type mask uint16

func (m mask) has(d int) bool { return m&(1<<d) != 0 }

func (v *vec) add(o *vec) {
	for d := range v {
		v[d] += o[d]
	}
}

func (v *vec) sub(o *vec) {
	for d := range v {
		v[d] -= o[d]
	}
}

// le reports whether v <= o in every dimension.
func (v *vec) le(o *vec) bool {
	for d := range v {
		if v[d] > o[d] {
			return false
		}
	}
	return true
}

func (v *vec) isZero() bool {
	for d := range v {
		if v[d] != 0 {
			return false
		}
	}
	return true
}

// clampNeg raises every negative dimension of v to 0.
func (v *vec) clampNeg() {
	for d := range v {
		v[d] = max(v[d], 0)
	}
}

// clampMin lowers every dimension of v to at most o (and at least 0).
func (v *vec) clampMin(o *vec) {
	for d := range v {
		if o[d] < v[d] {
			v[d] = max(o[d], 0)
		}
	}
}

// minimum is the smallest allocatable amount: an amount is allocatable when
// it reaches the minimum in at least one of the named kinds (Mesos's
// min_allocatable_resources semantics, "cpus:0.01 OR mem:32").
type minimum struct {
	v    vec
	m    mask
	dims []int // the kinds in m, so the hot check looks at one or two
}

func (mn *minimum) set(d int, x int64) {
	if !mn.m.has(d) {
		mn.dims = append(mn.dims, d)
	}
	mn.v[d] += x
	mn.m |= 1 << d
}

func (mn *minimum) allocatable(v *vec) bool {
	for _, d := range mn.dims {
		if v[d] >= mn.v[d] {
			return true
		}
	}
	return false
}

// fvec is a float vector used for (possibly meDRF-weighted) shares.
type fvec [maxKinds]float64

func (f *fvec) addScaled(v *vec, eta float64) {
	for d := range f {
		if v[d] != 0 {
			f[d] += float64(v[d]) * eta
		}
	}
}

func (f *fvec) subScaled(v *vec, eta float64) {
	for d := range f {
		if v[d] != 0 {
			f[d] -= float64(v[d]) * eta
		}
	}
}

// clearEmpty zeroes f where v holds nothing: float rounding leaves
// residues after additions and subtractions of η-weighted amounts.
func (f *fvec) clearEmpty(v *vec) {
	for d := range f {
		if v[d] == 0 {
			f[d] = 0
		}
	}
}

// dominant returns max_d f[d]*inv[d] over the first n kinds: the dominant
// share.
func (f *fvec) dominant(inv *fvec, n int) float64 {
	var s float64
	for d := range n {
		if x := f[d] * inv[d]; x > s {
			s = x
		}
	}
	return s
}
