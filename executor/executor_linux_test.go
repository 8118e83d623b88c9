package executor

import (
	"errors"
	"strings"
	"testing"
)

func TestIsCommandNotFound(t *testing.T) {
	for msg, want := range map[string]bool{
		`unable to start container process: exec: "nope": executable file not found in $PATH`:      true,
		`unable to start container process: exec: "/nope": stat /nope: no such file or directory`:  true,
		`unable to start container process: error during container init: mount: permission denied`: false,
	} {
		if got := isCommandNotFound(errors.New(msg)); got != want {
			t.Errorf("isCommandNotFound(%q) = %v", msg, got)
		}
	}
}

func TestCheckCgroupFile(t *testing.T) {
	hybrid := "12:name=systemd:/\n9:pids:/brim/c1\n4:memory:/brim/c1\n2:cpuacct:/brim/c1\n1:cpu:/brim/c1\n0::/\n"
	coMounted := "4:memory:/brim/c1\n2:cpu,cpuacct:/brim/c1\n"
	for _, tc := range []struct {
		name, file string
		unified    bool
		wantErr    bool
	}{
		{"v1 hybrid, all in place", hybrid, false, false},
		{"v1 cpu,cpuacct co-mounted", coMounted, false, false},
		{"v1 memory elsewhere", strings.Replace(hybrid, "memory:/brim/c1", "memory:/process_api/x", 1), false, true},
		{"v1 cpu elsewhere, co-mounted", "4:memory:/brim/c1\n2:cpu,cpuacct:/\n", false, true},
		{"v1 prefix is not a match", strings.ReplaceAll(hybrid, "/brim/c1", "/brim/c10"), false, true},
		{"v1 no managed hierarchy", "12:name=systemd:/brim/c1\n7:blkio:/brim/c1\n", false, true},
		{"v2 in place", "0::/brim/c1\n", true, false},
		{"v2 elsewhere", "0::/brim\n", true, true},
		{"v2 empty file", "", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCgroupFile(strings.NewReader(tc.file), "/brim/c1", tc.unified, 42)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if err != nil && !errors.Is(err, ErrNotConfined) {
				t.Fatalf("err = %v, want ErrNotConfined", err)
			}
		})
	}
}
