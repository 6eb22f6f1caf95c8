package plugin

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// suggestFlags answers a mistyped flag as cobra answers a mistyped
// sub-command: with the flags of the command that are close to it.
func suggestFlags(c *cobra.Command, err error) error {
	typed, ok := strings.CutPrefix(err.Error(), "unknown flag: --")
	if !ok {
		return err
	}
	typed, _, _ = strings.Cut(typed, "=")
	var near []string
	seen := map[string]bool{}
	visit := func(f *pflag.Flag) {
		if f.Hidden || seen[f.Name] {
			return
		}
		seen[f.Name] = true
		if flagNear(typed, f.Name) {
			near = append(near, "--"+f.Name)
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	if len(near) == 0 {
		return fmt.Errorf("%w\nsee '%s --help' for the flags", err, c.CommandPath())
	}
	sort.Strings(near)
	return fmt.Errorf("%w\n\nDid you mean this?\n\t%s", err, strings.Join(near, "\n\t"))
}

// flagNear is cobra's test for a sub-command suggestion: a Levenshtein
// distance of at most 2, or the typed text is the start of the name.
func flagNear(typed, name string) bool {
	if typed == "" {
		return false
	}
	return strings.HasPrefix(name, typed) || levenshtein(strings.ToLower(typed), strings.ToLower(name)) <= 2
}

func levenshtein(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}
