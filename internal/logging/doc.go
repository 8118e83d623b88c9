// Package logging builds the daemons' log/slog loggers from their
// --log-level and --log-format flags, and routes libcontainer's global
// logrus output into a slog logger.
package logging
