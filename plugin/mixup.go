package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/proxyrules/kubectl-proxyrules/inspect/input"
)

// readInput opens name and passes it to read, after checking it holds what
// the flag reads (input.Expect: "objects.json: this file is an iptables dump
// (iptables-save): pass it with --from-dump").
func (o *InputOptions) readInput(flag string, want input.Kind, name string, read func(r io.Reader, source string) error) error {
	if st, err := os.Stat(name); err == nil && st.IsDir() {
		return fmt.Errorf("%s is a directory: pass a bundle's folder with --from-bundle, and files with %s", name, flag)
	}
	rc, src, err := o.open(name)
	if err != nil {
		return err
	}
	defer rc.Close()
	r, err := input.Expect(rc, src, want)
	if err != nil {
		return err
	}
	return read(r, src)
}

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
