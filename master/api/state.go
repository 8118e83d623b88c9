package api

import "time"

// State is the master's state as GET /state reports it.
type State struct {
	StartedAt  time.Time             `json:"startedAt"`
	Agents     []AgentState          `json:"agents"`
	Frameworks []FrameworkState      `json:"frameworks"`
	Tasks      []TaskState           `json:"tasks"`
	Offers     []OfferState          `json:"offers"`
	Roles      []RoleState           `json:"roles"`
	Shares     []FrameworkShareState `json:"frameworkShares"`
	Quota      map[string]QuotaState `json:"quota"`
	Weights    map[string]float64    `json:"weights"`
	// CompletedTasks and CompletedFrameworks are the bounded history of
	// tasks and frameworks that left the master, oldest first
	// (the master's Options.MaxCompletedTasks, MaxCompletedFrameworks).
	CompletedTasks      []TaskState      `json:"completedTasks"`
	CompletedFrameworks []FrameworkState `json:"completedFrameworks"`
	// Cycles: allocation cycles run, offers made, tasks launched, and the
	// recent cycles' p50 and p99 in milliseconds.
	Cycles map[string]float64 `json:"cycles"`
	// Demands are the time-aware demands, in submission order (GET
	// /demands has each one whole: document, placement, history).
	Demands []DemandState `json:"demands"`
}

// DemandState is one time-aware demand in State (docs/demands.md).
type DemandState struct {
	ID        string    `json:"id"`
	State     string    `json:"state"`
	Framework string    `json:"framework"`
	Role      string    `json:"role"`
	Reason    string    `json:"reason,omitempty"`
	Message   string    `json:"message,omitempty"`
	Start     time.Time `json:"start,omitzero"` // planned hand-over; zero: not planned yet
	End       time.Time `json:"end,omitzero"`   // planned release; zero: open
}

// AgentState is one agent in State.
type AgentState struct {
	ID       string `json:"id"`
	Hostname string `json:"hostname"`
	// Principal is the principal the agent authenticated as (empty
	// without agent authentication).
	Principal string `json:"principal,omitempty"`
	Resources string `json:"resources"`
	Revocable string `json:"revocable,omitempty"`
	// RevocableInUse is what the agent's revocable tasks held when it
	// computed Revocable (the pool is the sum of both); empty from agents
	// that do not say.
	RevocableInUse string `json:"revocableInUse,omitempty"`
	Reserved       string `json:"reserved,omitempty"`
	Connected      bool   `json:"connected"`
	Unreachable    bool   `json:"unreachable,omitempty"`
	Tasks          int    `json:"tasks"`
	// PerformanceScore is the machine performance score the agent
	// reported (meDRF's; 0: none, the allocator reads it as 1).
	PerformanceScore float64 `json:"performanceScore"`
	// Oversubscription is the agent's estimate and QoS corrections (nil
	// without an estimator).
	Oversubscription *AgentOversubState `json:"oversubscription,omitempty"`
}

// FrameworkState is one framework in State.
type FrameworkState struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	Principal string   `json:"principal,omitempty"`
	Roles     []string `json:"roles"`
	Connected bool     `json:"connected"`
	Tasks     int      `json:"tasks"`
	Offers    int      `json:"offers"`
}

// TaskState is one task in State.
type TaskState struct {
	ID          string `json:"id"`
	Name        string `json:"name,omitempty"`
	FrameworkID string `json:"frameworkId"`
	AgentID     string `json:"agentId"`
	State       string `json:"state"`
	Resources   string `json:"resources"`
	Reason      string `json:"reason,omitempty"`
	Message     string `json:"message,omitempty"`
	// ExitCode is the command's exit code, when it exited.
	ExitCode *int32 `json:"exitCode,omitempty"`
	// Image is the image the task runs on, as its framework named it.
	Image string `json:"image,omitempty"`
}

// OfferState is one outstanding offer in State.
type OfferState struct {
	ID          string `json:"id"`
	FrameworkID string `json:"frameworkId"`
	AgentID     string `json:"agentId"`
	Role        string `json:"role"`
	Resources   string `json:"resources"`
}

// RoleState is a role's DRF share in State.
type RoleState struct {
	Role      string  `json:"role"`
	Weight    float64 `json:"weight"`
	Share     float64 `json:"share"`
	Allocated string  `json:"allocated"`
}

// FrameworkShareState is a framework's DRF share in one role.
type FrameworkShareState struct {
	FrameworkID string  `json:"frameworkId"`
	Role        string  `json:"role"`
	Share       float64 `json:"share"`
	Allocated   string  `json:"allocated"`
}

// QuotaState is a role's quota in State.
type QuotaState struct {
	Guarantee string `json:"guarantee,omitempty"`
	Limit     string `json:"limit,omitempty"`
}

// AgentOversubState is an agent's oversubscription status in State: its
// estimator's latest forwarded estimate and the QoS corrections in force.
type AgentOversubState struct {
	Estimator string `json:"estimator,omitempty"`
	QoS       string `json:"qos,omitempty"`
	// Estimate is the revocable capacity the agent forwarded; Summary
	// explains how the estimator computed it.
	Estimate string `json:"estimate"`
	Summary  string `json:"summary,omitempty"`
	// Corrections are the corrections in force (throttles, freezes) and
	// the agent's recent kills.
	Corrections []CorrectionState `json:"corrections"`
}

// CorrectionState is one QoS correction in AgentOversubState.
type CorrectionState struct {
	Type        string `json:"type"`
	ContainerID string `json:"containerId"`
	TaskID      string `json:"taskId,omitempty"`
	// CPUQuotaMilli is a throttle's cpu limit in thousandths of a cpu.
	CPUQuotaMilli int64  `json:"cpuQuotaMilli,omitempty"`
	Reason        string `json:"reason,omitempty"`
	// Signal, Victim, Value, Baseline and Threshold are the trigger.
	Signal    string    `json:"signal"`
	Victim    string    `json:"victim,omitempty"`
	Value     float64   `json:"value"`
	Baseline  float64   `json:"baseline"`
	Threshold float64   `json:"threshold"`
	AppliedAt time.Time `json:"appliedAt,omitzero"`
	// Active: in force now; false for a recent kill.
	Active bool `json:"active"`
}
