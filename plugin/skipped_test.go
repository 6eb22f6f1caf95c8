package plugin

import (
	"bytes"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// A sweep names the control-plane nodes it leaves out, and why; with
// nothing else to read it says how to read them.
func TestWarnSkipped(t *testing.T) {
	skipped := []collect.SkippedNode{{Node: "cp-1", Why: "control-plane node (label node-role.kubernetes.io/control-plane): pass --include-control-plane to read it"}, {Node: "cp-2", Why: "x"}}
	for _, tc := range []struct {
		left              int
		wantErr, wantWarn string
	}{
		{3, "", "Warning: skipped node cp-1: control-plane node (label node-role.kubernetes.io/control-plane): pass --include-control-plane to read it\nWarning: skipped node cp-2: x\n"},
		{0, "no node to sweep: every one is a control-plane node (cp-1, cp-2): pass --include-control-plane to read them", ""},
	} {
		var errOut bytes.Buffer
		err := (&Loader{ErrOut: &errOut}).warnSkipped(skipped, tc.left)
		if tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) || tc.wantErr == "" && err != nil {
			t.Errorf("left %d: err %v, want %q", tc.left, err, tc.wantErr)
		}
		if errOut.String() != tc.wantWarn {
			t.Errorf("left %d: stderr %q, want %q", tc.left, errOut.String(), tc.wantWarn)
		}
	}
	var errOut bytes.Buffer
	if err := (&Loader{ErrOut: &errOut}).warnSkipped(nil, 0); err != nil || errOut.Len() > 0 {
		t.Errorf("nothing skipped: %v %q", err, errOut.String())
	}
}
