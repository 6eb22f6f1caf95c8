//go:build linux

package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/internal/benchutil"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

// BenchmarkMapProcess runs the built command as the user does, a process
// of its own: `map -o json` with the objects on the generated iptables
// node of 5,000 Services × 20 endpoints (the nat table, 31.6 MB, and the
// objects, 30 MB), paired in every iteration with a `sha256sum` of the same
// files. Start-up, page faults and the garbage collector of a fresh
// process are in its time, as they are not in BenchmarkCommand's
// iterations. Reported: the medians over the iterations of each one's
// wall seconds and of their ratio (x-sha256), the child's peak RSS (the
// largest over the iterations), its minor page faults and its CPU time.
//
// With PROXYRULES_BENCH_BASE set to another build of the command (the
// code before a change), every iteration runs it too, in turn with the
// other two, and the same figures are reported for it (base-…), with the
// median of the rounds' ratios of the two (x-base): a change measured in
// the same minutes as the code it changes, on a machine whose speed
// drifts.
//
//	go test ./cmd/kubectl-proxyrules -run '^$' -bench MapProcess -benchtime 7x
func BenchmarkMapProcess(b *testing.B) {
	if _, err := exec.LookPath("sha256sum"); err != nil {
		b.Skip("sha256sum not found")
	}
	bin := binary(b)
	base := os.Getenv(baseBinaryEnv)
	f := writeNodeFiles(b)
	inputs := []string{f.IPTablesSave, f.Objects}
	var size int64
	for _, in := range inputs {
		st, err := os.Stat(in)
		if err != nil {
			b.Fatal(err)
		}
		size += st.Size()
	}
	mapArgs := []string{"map", "--from-dump", f.IPTablesSave, "--from-objects", f.Objects, "--node", synth.LocalNode, "-o", "json"}
	// Once untimed: the files in the page cache, and the command's answer
	// checked to be the report (the timed runs write to /dev/null).
	checkReport(b, bin, mapArgs)
	runs := []func() processRun{
		func() processRun { return runProcess(b, "sha256sum", inputs...) },
		func() processRun { return runProcess(b, bin, mapArgs...) },
	}
	if base != "" {
		checkReport(b, base, mapArgs)
		runs = append(runs, func() processRun { return runProcess(b, base, mapArgs...) })
	}
	runs[0]()
	var sums, maps, bases series
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Interleaved, each iteration starting with another of them, so
		// that drift in the machine's load falls on all.
		got := make([]processRun, len(runs))
		for j := range runs {
			k := (i + j) % len(runs)
			got[k] = runs[k]()
		}
		sums.add(got[0], got[0])
		maps.add(got[1], got[0])
		if base != "" {
			bases.add(got[2], got[0])
		}
	}
	b.StopTimer()
	b.ReportMetric(median(sums.wall), "sha256-s")
	maps.report(b, "")
	if base != "" {
		bases.report(b, "base-")
		b.ReportMetric(median(ratios(maps.wall, bases.wall)), "x-base")
	}
	b.ReportMetric(float64(benchutil.PeakRSS())/(1<<20), "parent-RSS-MB")
}

// baseBinaryEnv names another build of the command to run beside the
// one built here (BenchmarkMapProcess).
const baseBinaryEnv = "PROXYRULES_BENCH_BASE"

// series is what the iterations of one command measured.
type series struct {
	wall, ratio, faults, cpu []float64
	peak                     int64
}

// add records run, paired with the sha256sum run sum.
func (s *series) add(run, sum processRun) {
	s.wall = append(s.wall, run.wall.Seconds())
	s.ratio = append(s.ratio, run.wall.Seconds()/sum.wall.Seconds())
	s.faults = append(s.faults, float64(run.minflt))
	s.cpu = append(s.cpu, run.cpu.Seconds())
	s.peak = max(s.peak, run.maxRSS)
}

func (s *series) report(b *testing.B, prefix string) {
	b.ReportMetric(median(s.wall), prefix+"map-s")
	b.ReportMetric(median(s.ratio), prefix+"x-sha256")
	b.ReportMetric(median(s.cpu), prefix+"map-cpu-s")
	b.ReportMetric(median(s.faults), prefix+"minflt")
	b.ReportMetric(float64(s.peak)/(1<<20), prefix+"peak-RSS-MB")
}

// ratios is a[i]/b[i].
func ratios(a, b []float64) []float64 {
	out := make([]float64, len(a))
	for i := range a {
		out[i] = a[i] / b[i]
	}
	return out
}

// synthDirEnv, when set, makes the test binary write the generated node's
// files into that directory and exit. A child's ru_maxrss counts the peak
// of the process it was forked from (Go forks with CLONE_VM, and exec
// records the old address space's high-water mark), so the benchmark's
// own peak must stay below the command's: the 60 MB of files are
// generated in a process of their own.
const synthDirEnv = "PROXYRULES_BENCH_SYNTH_DIR"

func init() {
	dir := os.Getenv(synthDirEnv)
	if dir == "" {
		return
	}
	if _, err := benchCluster.WriteFiles(dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

var benchCluster = synth.Cluster{Services: 5000, Endpoints: 20}

// writeNodeFiles generates the node's files in a process of its own.
func writeNodeFiles(b *testing.B) synth.Files {
	dir := b.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), synthDirEnv+"="+dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("generating the node: %v\n%s", err, out)
	}
	// synth.Cluster.WriteFiles's names; the benchmark stats each file.
	return synth.Files{IPTablesSave: filepath.Join(dir, "iptables-save.txt"), Objects: filepath.Join(dir, "objects.json")}
}

// checkReport runs the command once into a file (not this process's
// memory: see synthDirEnv) and fails unless it wrote a JSON report.
func checkReport(b *testing.B, bin string, args []string) {
	out, err := os.Create(filepath.Join(b.TempDir(), "report.json"))
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = out, os.Stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%v: %v", args, err)
	}
	head := make([]byte, 64)
	n, _ := out.ReadAt(head, 0)
	st, err := out.Stat()
	if err != nil {
		b.Fatal(err)
	}
	if st.Size() < 1<<20 || !bytes.HasPrefix(head[:n], []byte("{")) {
		b.Fatalf("%v wrote no report: %d bytes: %q", args, st.Size(), head[:n])
	}
}

// processRun is what one run of a command cost, from its rusage.
type processRun struct {
	wall, cpu time.Duration
	maxRSS    int64 // bytes
	minflt    int64
}

// runProcess runs name with args, its output discarded, and fails the
// benchmark if it does not exit 0.
func runProcess(b *testing.B, name string, args ...string) processRun {
	cmd := exec.Command(name, args...)
	cmd.Stderr = os.Stderr
	start := time.Now()
	cmd.Stdout = nil // /dev/null
	if err := cmd.Run(); err != nil {
		b.Fatalf("%s %v: %v", name, args, err)
	}
	wall := time.Since(start)
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		b.Fatalf("no rusage for %s", name)
	}
	return processRun{
		wall:   wall,
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		maxRSS: ru.Maxrss * 1024,
		minflt: ru.Minflt,
	}
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
