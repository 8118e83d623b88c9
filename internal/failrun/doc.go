// Package failrun logs runs of failures of something the agent retries on a
// schedule (an estimator, a QoS controller): the first failure of a run at
// once, then at most one warning per interval carrying the number of
// failures since the last warning, and one line when it works again. A
// plugin that fails every second thus costs one log line a minute, not
// sixty, and its recovery is visible.
package failrun
