// Package netnstest gives tests a throw-away network namespace in which the
// real iptables and nft binaries can load and list rules without touching
// the machine's own ruleset. Tests that cannot have one (not root, tools
// missing) are skipped with one line saying why.
package netnstest

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"sync/atomic"
	"testing"
)

var counter atomic.Int32

// NS is a network namespace that is deleted when the test ends.
type NS struct {
	Name string
}

// New creates a namespace, or skips the test when that is impossible.
// tools are the binaries the test needs besides ip.
func New(t testing.TB, tools ...string) *NS {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("real-tool test skipped: needs root to create a network namespace")
	}
	for _, tool := range append([]string{"ip"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("real-tool test skipped: %s not installed (make test-deps installs it)", tool)
		}
	}
	name := fmt.Sprintf("prtest-%d-%d", os.Getpid(), counter.Add(1))
	if out, err := exec.Command("ip", "netns", "add", name).CombinedOutput(); err != nil {
		t.Skipf("real-tool test skipped: cannot create a network namespace: %v: %s", err, out)
	}
	ns := &NS{Name: name}
	t.Cleanup(func() {
		if out, err := exec.Command("ip", "netns", "del", name).CombinedOutput(); err != nil {
			t.Errorf("deleting network namespace %s: %v: %s", name, err, out)
		}
	})
	return ns
}

// Run runs a command inside the namespace with stdin and returns stdout.
func (n *NS) Run(stdin []byte, name string, args ...string) ([]byte, error) {
	cmd := exec.Command("ip", append([]string{"netns", "exec", n.Name, name}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return out.Bytes(), fmt.Errorf("%s %v: %v: %s", name, args, err, bytes.TrimSpace(errOut.Bytes()))
	}
	return out.Bytes(), nil
}
