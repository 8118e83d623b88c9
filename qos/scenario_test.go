package qos

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"log/slog"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/brimnode/brim/internal/testutil"
	"github.com/brimnode/brim/isolator"
	"github.com/brimnode/brim/monitor"
)

var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of the scenario scripts (testdata/interference/*.txt)")

// TestInterferenceScenarios runs the interference controller's scenario
// scripts, testdata/interference/*.txt: each a sequence of usage samples,
// each followed by the corrections, level and pending state expected after
// it (etcd-io/raft's interaction tests, with a tiny datadriven-style
// reader). A script:
//
//	# a comment
//	new warmup=3 persist=1        the controller, with --qos-opt options
//	----
//	ok
//
//	round t=4 lat=5ms be=a:0.9,b  one round at t0+4 s: the latency-critical
//	----                          container lc reports p99 5 ms; revocable
//	THROTTLE a to 200 mcpu: …     a used 0.9 cpu (a:cpu:io adds an io stall
//	THROTTLE b to 200 mcpu: …     fraction; b alone: no samples, counts as
//	level throttle                active); measured=<s> dates lc's report
//
//	why                           the controller's Debug trace of the
//	----                          last round (what it saw against which
//	signal=app-latency …          threshold, whom it blamed), or "quiet"
//
// Revocable containers start just before the round they first appear in,
// in the order they appear after new (the first is the oldest). go test -run Scenarios -rewrite writes the outputs back.
func TestInterferenceScenarios(t *testing.T) {
	files, err := filepath.Glob("testdata/interference/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scenario scripts: %v", err)
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".txt"), func(t *testing.T) { runScript(t, f) })
	}
}

func runScript(t *testing.T, path string) {
	var ic *Interference
	var trace bytes.Buffer
	log := slog.New(slog.NewTextHandler(&trace, &slog.HandlerOptions{Level: slog.LevelDebug,
		ReplaceAttr: func(groups []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, slog.LevelKey, slog.MessageKey:
				return slog.Attr{}
			}
			return a
		}}))
	starts := map[string]time.Time{}
	cases := testutil.ReadScript(t, path)
	failed := false
	for i, c := range cases {
		name, args, _ := strings.Cut(c.Cmd, " ")
		kv := map[string]string{}
		for _, a := range strings.Fields(args) {
			k, v, ok := strings.Cut(a, "=")
			if !ok {
				t.Fatalf("%s:%d: argument %q: want key=value", path, c.Line, a)
			}
			kv[k] = v
		}
		var got string
		switch name {
		case "new":
			ctl, err := NewInterference(Options(kv), log)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, c.Line, err)
			}
			ic, got = ctl.(*Interference), "ok"
			clear(starts)
		case "round":
			if ic == nil {
				t.Fatalf("%s:%d: round before new", path, c.Line)
			}
			u, err := scriptUsage(kv, starts)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, c.Line, err)
			}
			trace.Reset()
			cs, err := ic.Corrections(context.Background(), u)
			if err != nil {
				t.Fatalf("%s:%d: %v", path, c.Line, err)
			}
			got = renderRound(ic, cs)
		case "why":
			got = strings.TrimSpace(trace.String())
			if got == "" {
				got = "quiet"
			}
		default:
			t.Fatalf("%s:%d: unknown command %q", path, c.Line, name)
		}
		if got != c.Want {
			if *rewrite {
				cases[i].Want = got
				continue
			}
			t.Errorf("%s:%d: %s\ngot:\n%s\nwant:\n%s", path, c.Line, c.Cmd, got, c.Want)
			failed = true
			break // later steps depend on this one
		}
	}
	if *rewrite && !failed {
		testutil.WriteScript(t, path, cases)
	}
}

// renderRound is a round's corrections (with their triggers), the level
// after it, and whether a degradation is pending.
func renderRound(ic *Interference, cs []Correction) string {
	var b strings.Builder
	for _, c := range cs {
		b.WriteString(c.String() + "\n")
	}
	b.WriteString("level " + levelNames[ic.Level()])
	if ic.Pending() {
		b.WriteString(" pending")
	}
	return b.String()
}

// scriptUsage builds the usage of a round: t=<seconds since t0>,
// lat=<p99 of lc> (absent: lc reports nothing), measured=<seconds since
// t0 of lc's report>, lccpu=<cpus lc used over the last second> (absent:
// unknown, which counts as busy), rq=<lc's run-queue p99>,
// lcio=<fraction of the second lc stalled on io>, lcmem=<… on memory>,
// be=<[+]id[:cpu[:io[:mem[:MiB]]]],…> (a leading + runs the container at
// the LC's cpu priority instead of the best-effort class; mem is the
// fraction of the second it stalled on memory, MiB its working set).
func scriptUsage(kv map[string]string, starts map[string]time.Time) (monitor.Usage, error) {
	for k := range kv {
		if !slices.Contains([]string{"t", "lat", "measured", "be", "lccpu", "rq", "lcio", "lcmem"}, k) {
			return monitor.Usage{}, fmt.Errorf("unknown round argument %q", k)
		}
	}
	sec, err := strconv.Atoi(kv["t"])
	if err != nil {
		return monitor.Usage{}, fmt.Errorf("t=%q: %w", kv["t"], err)
	}
	var lat time.Duration
	if l, ok := kv["lat"]; ok {
		if lat, err = time.ParseDuration(l); err != nil {
			return monitor.Usage{}, fmt.Errorf("lat=%q: %w", l, err)
		}
	}
	u := node(sec, lat)
	lc := &u.Containers[0]
	if _, ok := kv["lat"]; !ok {
		lc.Latest.AppLatency = nil
	}
	if m, ok := kv["measured"]; ok {
		ms, err := strconv.Atoi(m)
		if err != nil {
			return monitor.Usage{}, fmt.Errorf("measured=%q: %w", m, err)
		}
		lc.Latest.AppLatency.Measured = t0.Add(time.Duration(ms) * time.Second)
	}
	flt := func(k string) (float64, bool, error) {
		v, ok := kv[k]
		if !ok {
			return 0, false, nil
		}
		f, err := strconv.ParseFloat(v, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s=%q: %w", k, v, err)
		}
		return f, true, nil
	}
	cpu, hasCPU, err := flt("lccpu")
	if err != nil {
		return monitor.Usage{}, err
	}
	lcio, _, err := flt("lcio")
	if err != nil {
		return monitor.Usage{}, err
	}
	lcmem, _, err := flt("lcmem")
	if err != nil {
		return monitor.Usage{}, err
	}
	if rq, ok := kv["rq"]; ok {
		d, err := time.ParseDuration(rq)
		if err != nil {
			return monitor.Usage{}, fmt.Errorf("rq=%q: %w", rq, err)
		}
		lc.Latest.RunQueue = &monitor.LatencySummary{P99: d, Source: "ebpf"}
	}
	if hasCPU || kv["lcio"] != "" || kv["lcmem"] != "" {
		prev, cur := twoSamples(u.Timestamp, cpu, lcio, lcmem, 0)
		cur.RunQueue, cur.AppLatency = lc.Latest.RunQueue, lc.Latest.AppLatency
		if !hasCPU {
			prev.HasCPU, cur.HasCPU = false, false
		}
		lc.Latest = cur
		lc.History = monitor.NewRing(2)
		lc.History.Push(prev)
		lc.History.Push(cur)
	}
	if kv["be"] == "" {
		return u, nil
	}
	for _, spec := range strings.Split(kv["be"], ",") {
		class := isolator.BestEffort
		if strings.HasPrefix(spec, "+") {
			spec, class = spec[1:], isolator.Guaranteed
		}
		f := strings.Split(spec, ":")
		id := f[0]
		if _, ok := starts[id]; !ok {
			// Started just before the round that first shows it (a
			// millisecond apart in the order they appear).
			starts[id] = u.Timestamp.Add(time.Duration(len(starts)-1000) * time.Millisecond)
		}
		c := monitor.ContainerUsage{ContainerInfo: monitor.ContainerInfo{
			ID: id, Revocable: true, StartedAt: starts[id],
			Limits: isolator.Limits{MilliCPUs: 1000, Class: class}}}
		if len(f) > 1 {
			var act [4]float64
			for i, s := range f[1:min(len(f), 5)] {
				if act[i], err = strconv.ParseFloat(s, 64); err != nil {
					return monitor.Usage{}, fmt.Errorf("be %q: %w", spec, err)
				}
			}
			prev, cur := twoSamples(u.Timestamp, act[0], act[1], act[2], uint64(act[3]*(1<<20)))
			c.Latest, c.History = cur, monitor.NewRing(2)
			c.History.Push(prev)
			c.History.Push(cur)
		}
		u.Containers = append(u.Containers, c)
	}
	return u, nil
}

// twoSamples returns two samples one second apart ending at now, over
// which a container used cpu cpus, stalled on io and memory for those
// fractions of the second, with working set ws bytes.
func twoSamples(now time.Time, cpu, io, mem float64, ws uint64) (prev, cur monitor.Statistics) {
	prev.Timestamp, cur.Timestamp = now.Add(-time.Second), now
	prev.HasCPU, cur.HasCPU = true, true
	prev.CPUUsageNanos = 5e9
	cur.CPUUsageNanos = prev.CPUUsageNanos + uint64(cpu*1e9)
	prev.HasPressure, cur.HasPressure = true, true
	cur.IOPressure.SomeTotal = time.Duration(io * float64(time.Second))
	cur.MemPressure.SomeTotal = time.Duration(mem * float64(time.Second))
	if ws > 0 {
		prev.HasMemory, cur.HasMemory = true, true
		prev.MemWorkingSet, cur.MemWorkingSet = ws, ws
	}
	return prev, cur
}
