package speclimit

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	manyLabels := func(n int) map[string]string {
		m := map[string]string{}
		for i := range n {
			m[fmt.Sprintf("k%d", i)] = "v"
		}
		return m
	}
	bigLabels := map[string]string{}
	for i := range 20 {
		bigLabels[fmt.Sprintf("k%d", i)] = strings.Repeat("v", MaxLabelValueBytes)
	}
	// 1 MiB of exec bytes in arguments of 64 KiB each.
	var manyArgs []string
	for range 16 {
		manyArgs = append(manyArgs, strings.Repeat("a", 64<<10))
	}
	for _, tc := range []struct {
		name    string
		command []string
		env     []string
		labels  map[string]string
		max     int
		want    string // "" when accepted; else a part of the error
	}{
		{name: "small", command: []string{"sleep", "1"}, env: []string{"A=b"}, labels: map[string]string{"a": "b"}, max: MaxLabels},
		{name: "arg at the limit", command: []string{"sh", strings.Repeat("x", MaxArgBytes)}, max: MaxLabels},
		{name: "arg past the limit", command: []string{"sh", strings.Repeat("x", MaxArgBytes+1)}, max: MaxLabels,
			want: "command argument 1 is 131072 bytes; the limit is 131071 bytes per argument (the kernel's MAX_ARG_STRLEN)"},
		{name: "140 KB argument", command: []string{"sh", strings.Repeat("x", 140_000)}, max: MaxLabels, want: "MAX_ARG_STRLEN"},
		{name: "env past the limit", command: []string{"sh"}, env: []string{"BIG=" + strings.Repeat("x", MaxArgBytes)}, max: MaxLabels,
			want: `env "BIG=xxxxxxxxxxxxxxxxxxxxxxxxxxxx"… is 131075 bytes`},
		{name: "exec bytes past the limit", command: append([]string{"sh"}, manyArgs...), max: MaxLabels,
			want: "the limit is 1048576 bytes"},
		{name: "many tiny args count their pointers", command: strings.Fields(strings.Repeat("a ", 110_000)), max: MaxLabels,
			want: "110000 strings with their NULs and 8-byte pointers"},
		{name: "labels at the count limit", command: []string{"sh"}, labels: manyLabels(MaxLabels), max: MaxLabels},
		{name: "too many labels", command: []string{"sh"}, labels: manyLabels(MaxLabels + 1), max: MaxLabels, want: "65 labels; the limit is 64"},
		{name: "too many task labels", command: []string{"sh"}, labels: manyLabels(MaxTaskLabels + 1), max: MaxTaskLabels, want: "57 labels; the limit is 56"},
		{name: "long label key", command: []string{"sh"}, labels: map[string]string{strings.Repeat("k", MaxLabelKeyBytes+1): "v"}, max: MaxLabels,
			want: "label key"},
		{name: "long label value", command: []string{"sh"}, labels: map[string]string{"k": strings.Repeat("v", MaxLabelValueBytes+1)}, max: MaxLabels,
			want: `label "k": value is 4097 bytes; the limit is 4096 bytes`},
		{name: "labels too large together", command: []string{"sh"}, labels: bigLabels, max: MaxLabels, want: "the limit is 65536 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Check(tc.command, tc.env, tc.labels, tc.max)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Check: %v, want ErrTooLarge containing %q", err, tc.want)
			}
		})
	}
}

func TestPages(t *testing.T) {
	id := func(n int) int { return n }
	for _, tc := range []struct {
		sizes  []int
		budget int
		want   [][]int
	}{
		{sizes: nil, budget: 10, want: nil},
		{sizes: []int{3, 3, 3, 3}, budget: 10, want: [][]int{{3, 3, 3}, {3}}},
		{sizes: []int{20, 1, 1}, budget: 10, want: [][]int{{20}, {1, 1}}}, // an item past the budget goes alone
		{sizes: []int{1, 20, 1}, budget: 10, want: [][]int{{1}, {20}, {1}}},
		{sizes: []int{5, 5, 5}, budget: 10, want: [][]int{{5, 5}, {5}}},
	} {
		got := Pages(tc.sizes, id, tc.budget)
		if fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("Pages(%v, %d) = %v, want %v", tc.sizes, tc.budget, got, tc.want)
		}
	}
	if n := PageLen([]int{1, 1, 1, 1}, id, 10, 3); n != 3 {
		t.Errorf("PageLen with maxItems 3 = %d, want 3", n)
	}
}
