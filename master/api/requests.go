package api

import (
	"fmt"
	"math"
	"strconv"
)

// ReserveRequest is the body of POST /reserve and /unreserve.
type ReserveRequest struct {
	AgentID   string `json:"agentId"`
	Resources string `json:"resources"` // e.g. "cpus(ads):1;mem(ads):512"
}

// QuotaRequest is the body of POST /quota; empty guarantee and limit
// remove the role's quota.
type QuotaRequest struct {
	Role      string `json:"role"`
	Guarantee string `json:"guarantee"`
	Limit     string `json:"limit"`
}

// WeightRequest is one entry of the body of POST /weights.
type WeightRequest struct {
	Role   string  `json:"role"`
	Weight float64 `json:"weight"`
}

// A role's weight is at least MinWeight and at most MaxWeight: DRF
// divides a role's share by it, and a weight of 1e308, Inf or 1e-320
// makes every share compare as 0 or infinite.
const (
	MinWeight = 1e-6
	MaxWeight = 1e6
)

// CheckWeight returns an error naming the range for a weight outside
// [MinWeight, MaxWeight] (NaN and the infinities included).
func CheckWeight(w float64) error {
	if math.IsNaN(w) || w < MinWeight || w > MaxWeight {
		return fmt.Errorf("weight %s: want a number from %g to %g", strconv.FormatFloat(w, 'g', -1, 64), MinWeight, MaxWeight)
	}
	return nil
}
