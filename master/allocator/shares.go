package allocator

import (
	"slices"

	"github.com/brimnode/brim/resources"
)

// RoleShare reports a role's state for /state and the demo.
type RoleShare struct {
	Role   string
	Weight float64
	// Share is the dominant share of the role's allocation (meDRF-weighted
	// under the medrf sorter), not divided by the weight.
	Share     float64
	Allocated resources.Resources
}

// FrameworkShare reports a framework's state in one role.
type FrameworkShare struct {
	FrameworkID string
	Role        string
	Share       float64
	Allocated   resources.Resources
	Suppressed  bool
}

// Shares reports every role's dominant share and allocation, sorted by
// role name.
func (a *Allocator) Shares() []RoleShare {
	a.refreshTotals()
	out := make([]RoleShare, 0, len(a.roles))
	for _, r := range a.roles {
		out = append(out, RoleShare{Role: r.name, Weight: r.weight, Share: a.share(&r.alloc, &r.w), Allocated: a.vecResources(&r.alloc)})
	}
	slices.SortFunc(out, func(x, y RoleShare) int { return cmpString(x.Role, y.Role) })
	return out
}

// FrameworkShares reports every framework's dominant share in each of its
// roles, sorted by framework ID then role.
func (a *Allocator) FrameworkShares() []FrameworkShare {
	a.refreshTotals()
	var out []FrameworkShare
	for _, c := range a.clients {
		if c == nil {
			continue
		}
		out = append(out, FrameworkShare{FrameworkID: c.fw.id, Role: a.roles[c.role].name,
			Share: a.share(&c.alloc, &c.w), Allocated: a.vecResources(&c.alloc), Suppressed: c.suppressed})
	}
	slices.SortFunc(out, func(x, y FrameworkShare) int {
		if c := cmpString(x.FrameworkID, y.FrameworkID); c != 0 {
			return c
		}
		return cmpString(x.Role, y.Role)
	})
	return out
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// vecResources formats a scalar vector as unreserved resources.
func (a *Allocator) vecResources(v *vec) resources.Resources {
	var out resources.Resources
	for d, n := range a.kinds {
		if v[d] != 0 {
			out = append(out, resources.Resource{Name: n, Type: resources.Scalar, Scalar: resources.Value(v[d])})
		}
	}
	return out
}

// appendPool appends v of pool p as resources.
func (a *Allocator) appendPool(out resources.Resources, p *pool, v *vec) resources.Resources {
	roleName := resources.Unreserved
	if p.key.role >= 0 {
		roleName = a.roles[p.key.role].name
	}
	for d := range a.kinds {
		if v[d] != 0 {
			out = append(out, resources.Resource{Name: a.kinds[d], Type: resources.Scalar, Scalar: resources.Value(v[d]),
				Role: roleName, Reservation: p.res, Revocable: p.key.revocable})
		}
	}
	return out
}
