package scheduler

var Jitter = jitter
