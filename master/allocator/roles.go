package allocator

import (
	"fmt"
	"math"

	"github.com/brimnode/brim/resources"
)

// Quota is a role's guarantee (served first, and protected from other roles
// by headroom) and limit (never exceeded by allocation). Only unreserved or
// reserved non-revocable scalars count; reservations for the role count
// toward both, allocated or not.
type Quota struct {
	Guarantee resources.Resources
	Limit     resources.Resources
}

type role struct {
	name    string
	idx     int32
	tie     uint64
	weight  float64
	members []int32 // clients
	clients minHeap
	// capClients holds the revocable-capable clients, in the same order.
	capClients minHeap
	alloc      vec
	w          fvec
	key        shareKey
	touched    uint64
	// quota
	guar, limit         vec
	guarMask, limitMask mask
	quota               Quota
	allocUnres          vec // non-revocable unreserved allocated to the role
	reserved            vec // every reservation for the role, allocated or not
	inStage             uint64
	visited             uint64
}

// consumed is the role's quota consumption.
func (r *role) consumed() vec {
	c := r.allocUnres
	c.add(&r.reserved)
	return c
}

// owed is what the role's guarantee still lacks, per kind (>= 0).
func (r *role) owed() vec {
	var o vec
	if r.guarMask == 0 {
		return o
	}
	c := r.consumed()
	for d := range maxKinds {
		if r.guarMask.has(d) && r.guar[d] > c[d] {
			o[d] = r.guar[d] - c[d]
		}
	}
	return o
}

// role interns a role name.
func (a *Allocator) role(name string) (*role, error) {
	if i, ok := a.roleIdx[name]; ok {
		return a.roles[i], nil
	}
	if name == "" || name == resources.Unreserved {
		return nil, fmt.Errorf("role %q: %w", name, ErrInvalid)
	}
	r := &role{name: name, idx: int32(len(a.roles)), tie: a.nextSeq(), weight: 1}
	a.roles = append(a.roles, r)
	a.roleIdx[name] = r.idx
	return r, nil
}

// SetQuota sets (or, with an empty Quota, clears) a role's quota. Only
// unreserved non-revocable scalars are allowed, each guarantee at most its
// limit. Errors wrap ErrInvalid.
func (a *Allocator) SetQuota(roleName string, q Quota) error {
	r, err := a.role(roleName)
	if err != nil {
		return fmt.Errorf("set quota: %w", err)
	}
	conv := func(rs resources.Resources) (vec, mask, error) {
		var v vec
		var m mask
		for _, x := range rs {
			if x.Type != resources.Scalar || x.Revocable || (x.Role != "" && x.Role != resources.Unreserved) || x.Scalar < 0 {
				return v, m, fmt.Errorf("set quota of %s: %s: must be an unreserved non-revocable scalar: %w", roleName, x, ErrInvalid)
			}
			d, err := a.kind(x.Name)
			if err != nil {
				return v, m, fmt.Errorf("set quota of %s: %w", roleName, err)
			}
			v[d] += int64(x.Scalar)
			m |= 1 << d
		}
		return v, m, nil
	}
	g, gm, err := conv(q.Guarantee)
	if err != nil {
		return err
	}
	l, lm, err := conv(q.Limit)
	if err != nil {
		return err
	}
	for d := range maxKinds {
		if gm.has(d) && lm.has(d) && g[d] > l[d] {
			return fmt.Errorf("set quota of %s: guarantee of %s above limit: %w", roleName, a.kinds[d], ErrInvalid)
		}
	}
	r.guar, r.guarMask, r.limit, r.limitMask, r.quota = g, gm, l, lm, q
	a.gen++
	a.anyQuota = false
	for _, x := range a.roles {
		if x.guarMask != 0 || x.limitMask != 0 {
			a.anyQuota = true
		}
	}
	return nil
}

// SetWeight sets a role's weight (> 0; default 1): a role with weight 2 is
// entitled to twice the dominant share of a role with weight 1. Errors
// wrap ErrInvalid.
func (a *Allocator) SetWeight(roleName string, w float64) error {
	if !(w > 0) || math.IsInf(w, 1) {
		return fmt.Errorf("set weight of %s: %v: %w", roleName, w, ErrInvalid)
	}
	r, err := a.role(roleName)
	if err != nil {
		return fmt.Errorf("set weight: %w", err)
	}
	r.weight = w
	return nil
}
