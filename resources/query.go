package resources

import (
	"fmt"
	"log/slog"
)

// String formats r in the canonical text syntax: entries in canonical order
// (by name; "*" before roles; static before dynamic; non-revocable first)
// separated by ";". Parse(r.String()) is Equal to r. Empty r gives "".
func (r Resources) String() string {
	n := r.normalized()
	if len(n) == 0 {
		return ""
	}
	b := make([]byte, 0, 16*len(n))
	for i := range n {
		if i > 0 {
			b = append(b, ';')
		}
		b = n[i].appendText(b)
	}
	return string(b)
}

// LogValue logs r in the canonical text syntax, not as a list of
// structs.
func (r Resources) LogValue() slog.Value { return slog.StringValue(r.String()) }

var _ slog.LogValuer = Resources(nil)

// Filter returns the entries of r for which keep returns true.
func (r Resources) Filter(keep func(Resource) bool) Resources {
	var out Resources
	for _, e := range r.normalized() {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// Revocable returns the revocable (oversubscribed) part of r.
func (r Resources) Revocable() Resources {
	return r.Filter(func(e Resource) bool { return e.Revocable })
}

// NonRevocable returns the non-revocable part of r.
func (r Resources) NonRevocable() Resources {
	return r.Filter(func(e Resource) bool { return !e.Revocable })
}

// Reserved returns what r has reserved (statically or dynamically) for
// role, or for any role when role is "".
func (r Resources) Reserved(role string) Resources {
	if role == "" {
		return r.Filter(func(e Resource) bool { return e.IsReserved() })
	}
	return r.Filter(func(e Resource) bool { return e.IsReserved() && e.Role == role })
}

// Unreserved returns the unreserved ("*") part of r, revocable included.
func (r Resources) Unreserved() Resources {
	return r.Filter(func(e Resource) bool { return !e.IsReserved() })
}

// ByRole splits r by role; unreserved resources are under "*". Empty r
// gives an empty (non-nil) map.
func (r Resources) ByRole() map[string]Resources {
	out := make(map[string]Resources)
	for _, e := range r.normalized() {
		out[e.Role] = append(out[e.Role], e)
	}
	return out
}

// Scalar returns the total of scalar resource name over all roles,
// reservations and revocability (0 when absent).
func (r Resources) Scalar(name string) Value {
	var v Value
	for i := range r {
		if e := &r[i]; e.Name == name && e.Type == Scalar && e.Scalar > 0 {
			v = addValue(v, e.Scalar)
		}
	}
	return v
}

// CPUs returns the total "cpus".
func (r Resources) CPUs() Value { return r.Scalar(CPUs) }

// Mem returns the total "mem" in MiB.
func (r Resources) Mem() Value { return r.Scalar(Mem) }

// Disk returns the total "disk" in MiB.
func (r Resources) Disk() Value { return r.Scalar(Disk) }

// NetBandwidth returns the total "net_bw" in Mbit/s.
func (r Resources) NetBandwidth() Value { return r.Scalar(NetBandwidth) }

// Ports returns the union of all "ports" ranges, sorted and merged, or nil.
func (r Resources) Ports() []Range {
	var out []Range
	for i := range r {
		if e := &r[i]; e.Name == Ports && e.Type == Ranges && len(e.Ranges) > 0 {
			out = unionRanges(out, e.Ranges)
		}
	}
	return out
}

// Flatten returns r with every role and reservation dropped (all "*"),
// keeping the revocable flag: what the node physically has.
func (r Resources) Flatten() Resources {
	out := make(Resources, 0, len(r))
	for _, e := range r {
		e.Role, e.Reservation = Unreserved, nil
		out = append(out, e)
	}
	return out.normalized()
}

// Reserve returns r dynamically reserved for role by principal (a RESERVE
// operation). Every entry of r must be unreserved and non-revocable: a
// revocable entry gives an error wrapping ErrRevocableReservation, a
// reserved one or an invalid role or principal an error wrapping ErrInvalid.
func (r Resources) Reserve(role, principal string) (Resources, error) {
	if role == Unreserved {
		return nil, fmt.Errorf("reserve for role %q: cannot reserve for the unreserved role: %w", role, ErrInvalid)
	}
	if why := checkRole(role); why != "" {
		return nil, fmt.Errorf("reserve for role %q: %s: %w", role, why, ErrInvalid)
	}
	if why := checkPrincipal(principal); why != "" {
		return nil, fmt.Errorf("reserve for role %q: %s: %w", role, why, ErrInvalid)
	}
	n := r.normalized()
	res := &Reservation{Principal: principal}
	out := make(Resources, 0, len(n))
	for _, e := range n {
		if e.Revocable {
			return nil, fmt.Errorf("reserve %s for role %q: %w", e.String(), role, ErrRevocableReservation)
		}
		if e.IsReserved() {
			return nil, fmt.Errorf("reserve %s for role %q: already reserved: %w", e.String(), role, ErrInvalid)
		}
		e.Role, e.Reservation = role, res
		out = append(out, e)
	}
	return out, nil
}

// Unreserve returns r with dynamic reservations released to "*" (an
// UNRESERVE operation). Static reservations are kept.
func (r Resources) Unreserve() Resources {
	out := make(Resources, 0, len(r))
	for _, e := range r {
		if e.Reservation != nil {
			e.Role, e.Reservation = Unreserved, nil
		}
		out = append(out, e)
	}
	return out.normalized()
}
