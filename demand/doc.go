// Package demand holds time-aware demands (seed 003): resources per task,
// a task count and a time description that the master plans ahead.
// The time description grammar lives in demand/timespec.
package demand
