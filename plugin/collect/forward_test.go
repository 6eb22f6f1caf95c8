package collect

import (
	"context"
	"io"
	"slices"
	"testing"
	"time"
)

// forwardingRunner is a fakeRunner that keeps port-forwards as the remote
// runner does: it counts the forwards opened and closed, and can lose the
// connection of the first forward after some GETs.
type forwardingRunner struct {
	*fakeRunner
	opened, closed int
	dropAfter      int // the first forward's GETs after this many get no answer; 0: never
}

func (r *forwardingRunner) Forward(ctx context.Context, t Target, port int) (GetFunc, func(), error) {
	r.opened++
	forward, served := r.opened, 0
	get := func(ctx context.Context, path string, w io.Writer) error {
		served++
		if forward == 1 && r.dropAfter > 0 && served > r.dropAfter {
			return &transportError{"GET 127.0.0.1:10249" + path + " on the node: EOF"}
		}
		return r.fakeRunner.get(port, path, w)
	}
	return get, func() { r.closed++ }, nil
}

func TestOneForwardPerRead(t *testing.T) {
	tests := []struct {
		name      string
		dropAfter int
		opened    int
		missing   string // the file the lost GET would have written
	}{
		{name: "every GET through one forward", opened: 1},
		{name: "a lost connection is opened again for the next GET", dropAfter: 1, opened: 2, missing: "metrics-before.txt"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultObjects()...)
			c := e.collector(Options{Node: testNode, Via: ViaDebugPod, Deadline: 5 * time.Minute})
			r := &forwardingRunner{fakeRunner: e.runner, dropAfter: tc.dropAfter}
			c.Runner = r
			man, err := c.Collect(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if r.opened != tc.opened || r.closed != r.opened {
				t.Errorf("%d forwards opened, %d closed; want %d, all closed", r.opened, r.closed, tc.opened)
			}
			if len(e.runner.gets) == 0 || !slices.Contains(e.runner.gets, "/configz") {
				t.Errorf("GETs %v: /configz not read through the forward", e.runner.gets)
			}
			for _, f := range []string{"proxymode.txt", "metrics-before.txt", "metrics.txt", "configz.json"} {
				if got := findFile(man, f) != nil; got != (f != tc.missing) {
					t.Errorf("%s in the bundle: %v, want %v", f, got, f != tc.missing)
				}
			}
			e.checkCleanedUp(t)
		})
	}
}
