package plugin

import (
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// A bundle folder packed again by hand, as people do to attach it to an
// incident (`tar czf b.tar.gz -C DIR .`: every name under "./"), reads
// as the folder does.
func TestFromBundleRepackedWithTar(t *testing.T) {
	tarBin, err := exec.LookPath("tar")
	if err != nil {
		t.Skip("tar not installed")
	}
	dir := t.TempDir()
	writeBundle(t, dir, [][2]string{
		{churnFixture + "iptables/save-nft-ipv4.txt", collect.KindRuleset},
		{churnFixture + "objects.json", collect.KindObjects},
	})
	for _, pack := range [][]string{{"czf", "DST", "-C", dir, "."}, {"czf", "DST", "-C", filepath.Dir(dir), filepath.Base(dir)}} {
		archive := filepath.Join(t.TempDir(), "b.tar.gz")
		args := append([]string(nil), pack...)
		args[1] = archive
		if out, err := exec.Command(tarBin, args...).CombinedOutput(); err != nil {
			t.Fatalf("tar %v: %v\n%s", args, err, out)
		}
		want, _, wantErr := runCmd(t, nil, "map", "--from-bundle", dir)
		got, errOut, err := runCmd(t, nil, "map", "--from-bundle", archive)
		if err != nil || wantErr != nil || got != want {
			t.Errorf("tar %v: map --from-bundle: %v (the folder: %v)\n%s\n--- got\n%.300s\n--- want\n%.300s", pack, err, wantErr, errOut, got, want)
		}
	}
}
