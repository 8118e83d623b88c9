package api

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
