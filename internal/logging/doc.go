// Package logging builds the daemons' log/slog loggers from their
// --log-level and --log-format flags, and routes libcontainer's global
// logrus output into a slog logger. Its handlers write one "component" per
// line, the innermost a logger was given (OneComponent), and durations as
// Go durations ("1.5s") in JSON too; values that would print as Go
// structs give their text through slog.LogValuer at their source.
package logging
