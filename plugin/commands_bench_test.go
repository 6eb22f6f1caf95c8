package plugin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/internal/benchutil"
	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

// Whole commands, from the files to the rendered answer, on generated
// nodes of 1,250, 2,500 and 5,000 Services × 20 endpoints (large-cluster
// mode): an iptables node (iptables-nft-save of nat, the objects, the
// metrics) and an nftables node with the same Services (nft -j). Reported
// per command: MB/s of input, x-read (the time as a multiple of a plain
// read of the same files), cpu-s/op (user and system CPU: what the command
// costs when other work shares the machine), out-MB, and peak-RSS-MB of
// the command run once in a process of its own (Linux).
//
//	go test ./plugin -run '^$' -bench Command -benchmem
//	go test ./plugin -run '^$' -bench 'Command/iptables-5000/map' -benchmem -count 6 | benchstat -

// benchServiceCounts are the sizes: each phase must stay linear in them.
var benchServiceCounts = []int{1250, 2500, 5000}

// benchCommands are the commands measured; {dump} {objects} {metrics} are
// the node's files.
var benchCommands = []struct{ name, args string }{
	{"map-json", "map --from-dump {dump} --from-objects {objects} --node " + synth.LocalNode + " -o json"},
	{"explain", "explain svc/svc-00042 -n bench --from-dump {dump} --from-objects {objects} --node " + synth.LocalNode},
	{"trace", "trace --to svc/svc-00042 -n bench --from-dump {dump} --from-objects {objects} --node " + synth.LocalNode + " --node-ip 10.0.0.10"},
	{"triage", "triage --from-dump {dump} --from-objects {objects} {metrics} --node " + synth.LocalNode + " --at 1795939210"},
	{"stale", "stale --from-dump {dump} --from-objects {objects} --node " + synth.LocalNode},
	{"counts", "counts --from-dump {dump} --from-objects {objects} {metrics} --node " + synth.LocalNode + " --at 1795939210"},
}

// benchExecEnv, when set, makes the test binary run one command (its
// arguments, separated by US, \x1f) and exit: the peak RSS of a command is
// measured in a process of its own.
const benchExecEnv = "PROXYRULES_BENCH_EXEC"

func init() {
	args := os.Getenv(benchExecEnv)
	if args == "" {
		return
	}
	cmd := NewCmdRoot(genericiooptions.IOStreams{In: os.Stdin, Out: io.Discard, ErrOut: os.Stderr})
	cmd.SetArgs(strings.Split(args, "\x1f"))
	var exit *ExitError
	if err := cmd.Execute(); err != nil && !errors.As(err, &exit) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("peak-rss %d\n", benchutil.PeakRSS())
	os.Exit(0)
}

type benchNode struct {
	mode  string // iptables or nftables
	files []string
	vars  map[string]string
}

func BenchmarkCommand(b *testing.B) {
	dir := b.TempDir()
	generated := map[int]synth.Files{}
	files := func(b *testing.B, n int) synth.Files {
		if f, ok := generated[n]; ok {
			return f
		}
		sub := filepath.Join(dir, fmt.Sprint(n))
		if err := os.Mkdir(sub, 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := synth.Cluster{Services: n, Endpoints: 20}.WriteFiles(sub)
		if err != nil {
			b.Fatal(err)
		}
		generated[n] = f
		return f
	}
	for _, mode := range []string{"iptables", "nftables"} {
		for _, n := range benchServiceCounts {
			for _, c := range benchCommands {
				b.Run(fmt.Sprintf("%s-%d/%s", mode, n, c.name), func(b *testing.B) {
					f := files(b, n)
					node := benchNode{mode: mode, files: []string{f.IPTablesSave, f.Objects, f.Metrics},
						vars: map[string]string{"{dump}": f.IPTablesSave, "{objects}": f.Objects, "{metrics}": "--from-metrics " + f.Metrics}}
					if mode == "nftables" {
						node.files = []string{f.NFTJSON, f.Objects}
						node.vars = map[string]string{"{dump}": f.NFTJSON, "{objects}": f.Objects, "{metrics}": ""}
					}
					benchmarkCommand(b, node, c.args)
				})
			}
		}
	}
}

func benchmarkCommand(b *testing.B, node benchNode, template string) {
	args := strings.Fields(template)
	for i, a := range args {
		if v, ok := node.vars[a]; ok {
			args[i] = v
		}
	}
	args = strings.Fields(strings.Join(args, " "))
	var size int64
	for _, f := range node.files {
		if strings.Contains(strings.Join(args, " "), f) {
			st, err := os.Stat(f)
			if err != nil {
				b.Fatal(err)
			}
			size += st.Size()
		}
	}
	read := plainRead(b, node.files, args)
	out := &countingWriter{}
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := benchutil.CPUTime()
	for i := 0; i < b.N; i++ {
		out.n = 0
		cmd := NewCmdRoot(genericiooptions.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: io.Discard})
		cmd.SetArgs(args)
		var exit *ExitError
		if err := cmd.Execute(); err != nil && !errors.As(err, &exit) {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := benchutil.CPUTime() - cpu0
	if out.n == 0 {
		b.Fatal("the command printed nothing")
	}
	perOp := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(perOp/read.Seconds(), "x-read")
	if cpu > 0 {
		b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s/op")
	}
	b.ReportMetric(float64(out.n)/1e6, "out-MB")
	if rss := peakRSS(b, args); rss > 0 {
		b.ReportMetric(float64(rss)/(1<<20), "peak-RSS-MB")
	}
}

// plainRead is the fastest of three plain reads of the files the command
// reads: the floor the command is compared with.
func plainRead(b *testing.B, files, args []string) time.Duration {
	joined := strings.Join(args, " ")
	best := time.Duration(1<<63 - 1)
	for range 3 {
		start := time.Now()
		for _, f := range files {
			if !strings.Contains(joined, f) {
				continue
			}
			if _, err := os.ReadFile(f); err != nil {
				b.Fatal(err)
			}
		}
		best = min(best, time.Since(start))
	}
	return best
}

// peakRSS runs the command once in a process of its own and returns its
// peak resident set size in bytes, as it reports it (0 where the OS does
// not say).
func peakRSS(b *testing.B, args []string) int64 {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), benchExecEnv+"="+strings.Join(args, "\x1f"))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("%v in a process of its own: %v", args, err)
	}
	var rss int64
	fmt.Sscanf(string(out), "peak-rss %d", &rss)
	return rss
}

type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }
