package api

import (
	"encoding/json"
	"time"
)

// Demand is a time-aware demand (docs/demands.md) as the operator API
// shows it: GET /demands and /demands/ID, and the answers of POST
// /demands and DELETE /demands/ID. Doc is the spec as the master keeps
// it (canonical JSON); State, From and To are the state machine's names
// (ACCEPTED, ALLOCATING, …).
type Demand struct {
	ID        string          `json:"id"`
	Doc       json.RawMessage `json:"doc"`
	Framework string          `json:"framework"`
	Role      string          `json:"role"`
	State     string          `json:"state"`
	Reason    string          `json:"reason,omitempty"`
	Message   string          `json:"message,omitempty"`
	Submitted time.Time       `json:"submitted"`
	// Updated is when its document was last changed (PUT
	// /demands/ID); zero: never.
	Updated time.Time `json:"updated,omitzero"`
	// Start and End are the planned hand-over and release (End zero:
	// open); Placement is where (zero Start: not planned yet).
	Start     time.Time    `json:"start,omitzero"`
	End       time.Time    `json:"end,omitzero"`
	Placement []DemandSlot `json:"placement,omitempty"`
	// Late: a loose demand planned or running past its window or
	// deadline. Relaxed: one whose opportunities passed, handed
	// resources on any agent.
	Late          bool      `json:"late,omitempty"`
	Relaxed       bool      `json:"relaxed,omitempty"`
	AllocatedAt   time.Time `json:"allocatedAt,omitzero"`
	ClaimedAt     time.Time `json:"claimedAt,omitzero"`
	EndedAt       time.Time `json:"endedAt,omitzero"`
	Opportunities int       `json:"opportunities,omitempty"`
	// Handed is how many tasks' worth were handed over, Launched how
	// many tasks its framework launched on it; LiveTasks are those not
	// ended, Failures those that ended without finishing.
	Handed    int                `json:"handed,omitempty"`
	Launched  int                `json:"launched,omitempty"`
	LiveTasks []string           `json:"liveTasks,omitempty"`
	Failures  int                `json:"failures,omitempty"`
	History   []DemandTransition `json:"history"`
}

// DemandSlot is a demand's part on one agent: Tasks planned there, of
// which Handed were handed over.
type DemandSlot struct {
	Agent  string `json:"agent"`
	Tasks  int    `json:"tasks"`
	Handed int    `json:"handed,omitempty"`
}

// DemandTransition is one change of a demand's state.
type DemandTransition struct {
	At      time.Time `json:"at"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Reason  string    `json:"reason,omitempty"`
	Message string    `json:"message,omitempty"`
}
