// Package osthread runs a function on an OS thread of its own that ends
// with it: what the function changes of its thread (the namespaces it
// enters or unshares, the cgroup it moves into) no other goroutine ever
// sees. Go ends a thread whose goroutine exits locked to it — except the
// process's main thread, which the runtime parks for good instead, still
// in whatever the function left it in (and /proc/self shows the main
// thread's namespaces). So the function never runs on the main thread:
// started there, the goroutine holds it while a second one, on another
// thread, runs the function, then gives it back.
package osthread
