package master

import "github.com/brimnode/brim/master/api"

// The operator API's wire types live in package master/api, which the
// client imports without the master; the master's own names for them are
// aliases.
type (
	// State is the master's state as GET /state reports it.
	State = api.State
	// AgentState is one agent in State.
	AgentState = api.AgentState
	// FrameworkState is one framework in State.
	FrameworkState = api.FrameworkState
	// OfferState is one outstanding offer in State.
	OfferState = api.OfferState
	// RoleState is a role's DRF share in State.
	RoleState = api.RoleState
	// FrameworkShareState is a framework's DRF share in one role.
	FrameworkShareState = api.FrameworkShareState
	// QuotaState is a role's quota in State.
	QuotaState = api.QuotaState
	// AgentOversubState is an agent's oversubscription status in State.
	AgentOversubState = api.AgentOversubState
	// CorrectionState is one QoS correction in AgentOversubState.
	CorrectionState = api.CorrectionState
	// DemandState is one time-aware demand in State.
	DemandState = api.DemandState

	// ReserveRequest is the body of POST /reserve and /unreserve.
	ReserveRequest = api.ReserveRequest
	// QuotaRequest is the body of POST /quota.
	QuotaRequest = api.QuotaRequest
	// WeightRequest is one entry of the body of POST /weights.
	WeightRequest = api.WeightRequest
)
