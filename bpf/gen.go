package bpf

// The C source sits beside this line; the generated Go bindings and objects
// are committed so a build never needs clang. vmlinux.h is the full
// `bpftool btf dump file /sys/kernel/btf/vmlinux format c` of a 6.18 kernel
// (CO-RE relocates field offsets at load time on other kernels).
//go:generate go tool bpf2go -cc clang-14 -cflags "-O2 -g -Wall -Werror" -target amd64 -type cg_stats -type oom_event sched sched.c -- -I.
