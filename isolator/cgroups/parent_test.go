package cgroups

import (
	"os"
	"path/filepath"
	"testing"
)

func TestParentMemoryFixture(t *testing.T) {
	for _, tt := range []struct {
		name   string
		v2     bool
		files  map[string]string
		want   ScopeMemory
		isNode bool
	}{
		{"v1 limited", false, map[string]string{"memory.usage_in_bytes": "300", "memory.limit_in_bytes": "1000",
			"memory.stat": "cache 10\ntotal_inactive_file 100\n"}, ScopeMemory{Used: 200, Limit: 1000}, false},
		{"v2 limited", true, map[string]string{"memory.current": "500", "memory.max": "2000",
			"memory.stat": "anon 400\ninactive_file 50\n"}, ScopeMemory{Used: 450, Limit: 2000}, false},
		{"v1 unlimited: the node", false, map[string]string{"memory.limit_in_bytes": "9223372036854771712"}, ScopeMemory{}, true},
		{"v2 unlimited: the node", true, map[string]string{"memory.max": "max"}, ScopeMemory{}, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			root := t.TempDir()
			dir := filepath.Join(root, "memory", "brim")
			if tt.v2 {
				dir = filepath.Join(root, "brim")
				if err := os.WriteFile(filepath.Join(root, "cgroup.controllers"), []byte("memory"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			for f, v := range tt.files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(v+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			i, err := New(Config{Root: root, Parent: "/brim"})
			if err != nil {
				t.Fatal(err)
			}
			got, err := i.ParentMemory()
			if err != nil {
				t.Fatal(err)
			}
			if tt.isNode {
				if !got.Node || got.Limit == 0 || got.Used > got.Limit {
					t.Errorf("node figures %+v", got)
				}
				return
			}
			if got != tt.want {
				t.Errorf("ParentMemory = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNodeMemory(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte("MemTotal:       1000 kB\nMemFree: 10 kB\nMemAvailable:    400 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := nodeMemory(dir)
	if err != nil || got != (ScopeMemory{Used: 600 << 10, Limit: 1000 << 10, Node: true}) {
		t.Errorf("nodeMemory = %+v, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "meminfo"), []byte("MemTotal: 1000 kB\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := nodeMemory(dir); err == nil {
		t.Error("meminfo without MemAvailable: no error")
	}
}
