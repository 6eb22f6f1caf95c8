package plugin

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/inspect/input"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

func fileSize(t *testing.T, name string) int64 {
	t.Helper()
	st, err := os.Stat(name)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// Every kind of input has a cap, enforced where it is opened: one byte over
// it is an error that names the cap and the flag that raises it; at the cap
// it reads as before.
func TestInputCaps(t *testing.T) {
	dump := smallFixture + "iptables/save-nft-ipv4.txt"
	nftJSON := smallFixture + "nftables/ruleset.json"
	objects := smallFixture + "objects.json"
	metrics := smallFixture + "metrics-iptables.txt"
	config := smallFixture + "kube-proxy-configmap-iptables.yaml"
	base := []string{"map", "--node", "node-a"}
	tests := []struct {
		kind, file string
		args       []string
	}{
		{"dump", dump, []string{"--from-dump", dump}},
		{"dump", nftJSON, []string{"--from-dump", nftJSON}},
		{"objects", objects, []string{"--from-dump", dump, "--from-objects", objects}},
		{"metrics", metrics, []string{"--from-dump", dump, "--from-metrics", metrics}},
		{"config", config, []string{"--from-dump", dump, "--from-config", config}},
	}
	for _, tt := range tests {
		t.Run(tt.kind+" "+filepath.Base(tt.file), func(t *testing.T) {
			size := fileSize(t, tt.file)
			args := append(append([]string{}, base...), tt.args...)
			over := append(args, "--max-input-size", tt.kind+"="+itoa(size-1))
			_, _, err := runCmd(t, nil, over...)
			if err == nil {
				t.Fatalf("a %s input of %d bytes read under a cap of %d", tt.kind, size, size-1)
			}
			for _, want := range []string{"larger than the cap", "on " + tt.kind + " inputs", "--max-input-size " + tt.kind + "="} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			at := append(args, "--max-input-size", tt.kind+"="+itoa(size))
			if _, errOut, err := runCmd(t, nil, at...); err != nil {
				t.Errorf("a %s input exactly at the cap: %v\n%s", tt.kind, err, errOut)
			}
		})
	}
	if _, _, err := runCmd(t, nil, "map", "--from-dump", dump, "--max-input-size", "rules=1Gi"); err == nil || !strings.Contains(err.Error(), "KIND=SIZE") {
		t.Errorf("an unknown kind: %v", err)
	}
	for _, k := range []string{capDump, capObjects, capMetrics, capConfig, capBundle} {
		if defaultCaps[k] <= 0 {
			t.Errorf("no default cap on %s", k)
		}
	}
}

// endless is an input that never ends (a stream someone pipes in, a
// device): a head, then line after line. Reading it stops at the cap, in
// bounded time and memory.
type endless struct {
	head, line string
	off        int
}

func (e *endless) Read(p []byte) (int, error) {
	n := 0
	for n < len(p) {
		if e.head != "" {
			c := copy(p[n:], e.head)
			e.head, n = e.head[c:], n+c
			continue
		}
		c := copy(p[n:], e.line[e.off:])
		n, e.off = n+c, (e.off+c)%len(e.line)
	}
	return n, nil
}

func TestEndlessInputStopsAtTheCap(t *testing.T) {
	dump := smallFixture + "iptables/save-nft-ipv4.txt"
	for _, tc := range []struct {
		kind string
		args []string
		head string
		line string
	}{
		{"dump", []string{"--from-dump", "-"}, "*nat\n", "-A KUBE-SERVICES -j ACCEPT\n"},
		{"objects", []string{"--from-dump", dump, "--from-objects", "-"}, `{"kind":"List","items":[`,
			`{"apiVersion":"v1","kind":"Service","metadata":{"name":"x","namespace":"y"},"spec":{"clusterIP":"10.96.0.1"}},`},
		// Long lines: the cap on size, not the one on samples, is met first.
		{"metrics", []string{"--from-dump", dump, "--from-metrics", "-"}, "", "kubeproxy_sync_proxy_rules_iptables_total{table=\"nat\",p=\"" + strings.Repeat("x", 60) + "\"} 1\n"},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			var out, errOut bytes.Buffer
			cmd := NewCmdRoot(genericiooptions.IOStreams{In: &endless{head: tc.head, line: tc.line}, Out: &out, ErrOut: &errOut})
			cmd.SetArgs(append(append([]string{"map", "--node", "node-a"}, tc.args...), "--max-input-size", tc.kind+"=4Mi"))
			done := make(chan error, 1)
			go func() { done <- cmd.Execute() }()
			select {
			case err := <-done:
				if err == nil || !strings.Contains(err.Error(), "--max-input-size "+tc.kind+"=8Mi") {
					t.Errorf("endless %s input: %v, want the cap's error", tc.kind, err)
				}
			case <-time.After(20 * time.Second):
				t.Fatalf("an endless %s input is read for ever", tc.kind)
			}
		})
	}
}

// A bundle whose objects.json inflates past the cap on objects is refused
// while it is extracted, with the flag that raises it.
func TestBundleFileOverItsCap(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, [][2]string{
		{smallFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
		{smallFixture + "objects.json", collect.KindObjects},
	})
	archive := filepath.Join(t.TempDir(), "node-a.tar.gz")
	if err := collect.WriteTarGz(dir, archive); err != nil {
		t.Fatal(err)
	}
	size := fileSize(t, smallFixture+"objects.json")
	for _, b := range []string{archive, dir} {
		_, _, err := runCmd(t, nil, "map", "--from-bundle", b, "--max-input-size", "objects="+itoa(size-1))
		if err == nil || !strings.Contains(err.Error(), "--max-input-size objects=") {
			t.Errorf("--from-bundle %s with objects over the cap: %v", filepath.Base(b), err)
		}
	}
	_, _, err := runCmd(t, nil, "map", "--from-bundle", archive, "--max-input-size", "bundle="+itoa(size))
	if err == nil || !strings.Contains(err.Error(), "--max-input-size bundle=") {
		t.Errorf("a bundle over the total cap: %v", err)
	}
	// --from-objects replaces the bundle's: its objects are not even extracted.
	if _, errOut, err := runCmd(t, nil, "map", "--from-bundle", archive, "--from-objects", smallFixture+"objects.json", "--max-input-size", "objects="+itoa(size)+",bundle="+itoa(fileSize(t, smallFixture+"iptables/save-nft-ipv4.txt"))); err != nil {
		t.Errorf("the bundle's objects, replaced, still count: %v\n%s", err, errOut)
	}
}

// A bundle folder is read through the bundle: a listed file that is a link
// out of it, or a FIFO, is an error, not a read of /etc/shadow or a hang.
func TestFromBundleRefusesLinks(t *testing.T) {
	dir := t.TempDir()
	writeBundle(t, dir, [][2]string{{smallFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset}})
	target, _ := filepath.Abs(smallFixture + "iptables/save-nft-ipv6.txt")
	p := filepath.Join(dir, "save-nft-ipv4.txt")
	os.Remove(p)
	if err := os.Symlink(target, p); err != nil {
		t.Skipf("no symlinks: %v", err)
	}
	_, _, err := runCmd(t, nil, "map", "--from-bundle", dir)
	if err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a listed file that links out of the bundle: %v", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// A file read through its cap and the check of its kind still says its
// size, so that readers holding it whole allocate once; never more than
// the cap, so that a huge file meets the cap's error, not an allocation.
func TestInputSizeThroughTheCap(t *testing.T) {
	dump := smallFixture + "iptables/save-nft-ipv4.txt"
	st, err := os.Stat(dump)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		cap  string
		want int64
	}{
		{"", st.Size()},
		{"dump=1Ki", 1025},
	} {
		caps, err := parseCaps(tc.cap)
		if err != nil {
			t.Fatal(err)
		}
		rc, src, err := (&Loader{Caps: caps}).inputSet(Request{Files: InputFiles{Dumps: []string{dump}}}).open(dump)
		if err != nil {
			t.Fatal(err)
		}
		if got := inspect.InputSize(rc); got != tc.want {
			t.Errorf("cap %q: size %d, want %d", tc.cap, got, tc.want)
		}
		if tc.cap == "" { // the check of its kind passes the size on
			r, err := input.Expect(rc, src, input.KindRuleset)
			if err != nil {
				t.Fatal(err)
			}
			if got := inspect.InputSize(r); got != tc.want {
				t.Errorf("after the check: size %d, want %d", got, tc.want)
			}
		}
		rc.Close()
	}
}
