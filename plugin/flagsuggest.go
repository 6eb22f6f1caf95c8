package plugin

import (
	"fmt"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/internal/textdist"
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
	return strings.HasPrefix(name, typed) || textdist.Levenshtein(strings.ToLower(typed), strings.ToLower(name), 2) <= 2
}
