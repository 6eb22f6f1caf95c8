package collect

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// recordingTee keeps what a RulesTee is given.
type recordingTee struct {
	got   map[string]*bytes.Buffer
	ended map[string]bool
}

func (r *recordingTee) Begin(path string) io.Writer {
	r.got[path] = &bytes.Buffer{}
	return r.got[path]
}

func (r *recordingTee) End(path string, ok bool) { r.ended[path] = ok }

// TestCollectTee: every ruleset output of a whole read goes to the tee as
// it goes to its file, byte for byte, and is ended with its command's
// success; nothing else does.
func TestCollectTee(t *testing.T) {
	e := newEnv(t, defaultObjects()...)
	e.runner.outputs["ip6tables-legacy-save"] = fakeResult{rc: 1}
	tee := &recordingTee{got: map[string]*bytes.Buffer{}, ended: map[string]bool{}}
	c := e.collector(Options{Node: testNode, Via: ViaDebugPod})
	c.Tee = tee
	man, err := c.Collect(context.Background())
	if err != nil {
		t.Fatalf("Collect: %v", err)
	}
	rulesets := 0
	for _, f := range man.Files {
		buf, teed := tee.got[f.Path]
		if f.Kind != KindRuleset {
			if teed {
				t.Errorf("%s (%s) went to the tee", f.Path, f.Kind)
			}
			continue
		}
		rulesets++
		data, err := os.ReadFile(filepath.Join(e.dir, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if !teed || !bytes.Equal(buf.Bytes(), data) {
			t.Errorf("%s: the tee got %d bytes, the file holds %d", f.Path, buf.Len(), len(data))
		}
		if ok, ended := tee.ended[f.Path]; !ended || ok != (f.Error == "") {
			t.Errorf("%s: ended %v ok %v, file error %q", f.Path, ended, ok, f.Error)
		}
	}
	if ok, ended := tee.ended[Save(kubeproxy.IPv6, kubeproxy.BackendLegacy).FileName()]; rulesets == 0 || !ended || ok {
		t.Errorf("rulesets %d, ended %v: want the failed ip6tables-legacy-save ended not ok", rulesets, tee.ended)
	}
}
