package plugin

import (
	"context"
	"errors"
	"os"

	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
)

// misplacedBundle explains a --from-bundle that is another kind of file.
func misplacedBundle(name string, err error) error {
	// Only a regular file is looked into: a FIFO would block, and an
	// interrupted read is not a misplaced file.
	st, statErr := os.Stat(name)
	if statErr != nil || !st.Mode().IsRegular() || errors.Is(err, context.Canceled) {
		return err
	}
	f, openErr := os.Open(name)
	if openErr != nil {
		return err
	}
	defer f.Close()
	if _, expErr := input.Expect(f, name, input.KindBundle); expErr != nil {
		return expErr
	}
	return err
}
