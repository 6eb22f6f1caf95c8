//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	childEnv = "PROXYRULES_E2E_CHILD" // set in the child: the cluster is up
	envFile  = "PROXYRULES_E2E_ENV"   // the env file written by up.sh
	binEnv   = "PROXYRULES_E2E_PLUGIN_BIN"
)

// repoRoot is the module root (tests run in the package directory).
var repoRoot = func() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}()

// e2eCache is where hack/e2e keeps binaries, state and logs (E2E_CACHE).
func e2eCache() string {
	if c := os.Getenv("E2E_CACHE"); c != "" {
		return c
	}
	return filepath.Join(repoRoot, ".cache", "e2e")
}

func TestMain(m *testing.M) {
	flag.Parse()
	// iptables, nft and ip live in sbin, which a non-login root PATH may lack.
	os.Setenv("PATH", "/usr/local/sbin:/usr/sbin:/sbin:"+os.Getenv("PATH"))
	if os.Getenv(childEnv) == "1" {
		if err := loadClusterEnv(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e:", err)
			os.Exit(1)
		}
		if err := applyDeploy(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: kubectl apply -f deploy/:", err)
			os.Exit(1)
		}
		os.Exit(m.Run())
	}
	os.Exit(supervise())
}

func say(format string, args ...any) {
	fmt.Fprintf(os.Stdout, "e2e: "+format+"\n", args...)
}

// skip prints the one line and returns the exit code.
func skip(reason string) int {
	if os.Getenv("E2E_REQUIRED") == "1" {
		say("FAIL: cannot run (E2E_REQUIRED=1): %s", reason)
		return 1
	}
	say("SKIP: %s", reason)
	return 0
}

// cannotRun says why this machine cannot run the suite, or "".
func cannotRun() string {
	if os.Geteuid() != 0 {
		return "end-to-end cluster needs root (network namespaces, a bridge, iptables)"
	}
	for _, tool := range []string{"ip", "iptables-save", "ip6tables-save", "nft", "openssl", "curl", "unshare", "setsid", "flock", "go", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " not installed (hack/e2e/deps.sh installs it)"
		}
	}
	probe := fmt.Sprintf("prtest-e2e-probe-%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", probe).CombinedOutput(); err != nil {
		return fmt.Sprintf("cannot create a network namespace: %v: %s", err, bytes.TrimSpace(out))
	}
	exec.Command("ip", "netns", "del", probe).Run()
	return ""
}

// deadline: go test kills the binary one minute after -timeout; leave room
// for teardown before that.
func deadline(start time.Time) time.Time {
	d := 10 * time.Minute
	if f := flag.Lookup("test.timeout"); f != nil {
		if v, err := time.ParseDuration(f.Value.String()); err == nil {
			d = v
		}
	}
	if d <= 0 {
		d = 24 * time.Hour
	}
	return start.Add(d)
}

func supervise() int {
	start := time.Now()
	end := deadline(start)
	if reason := cannotRun(); reason != "" {
		return skip(reason)
	}

	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	timeout := time.NewTimer(time.Until(end))
	defer timeout.Stop()

	logs := filepath.Join(e2eCache(), "logs")
	os.MkdirAll(logs, 0o755)

	// 1. Build the cluster parts (cached by version). Failing to build is
	// "cannot run", not a test failure.
	buildStart := time.Now()
	buildLog := filepath.Join(logs, "build.log")
	if code, interrupted := runScript(sigs, timeout.C, buildLog, nil, "hack/e2e/build.sh"); interrupted {
		say("interrupted while building")
		return 1
	} else if code != 0 {
		return skip(fmt.Sprintf("cannot build the cluster parts from the Go module proxy (log: %s)", rel(buildLog)))
	}
	say("cluster parts ready in %s (cached in .cache/e2e/bin)", time.Since(buildStart).Round(100*time.Millisecond))

	// 2. One cluster per machine: wait for another run to finish (the lock
	// dies with its holder, so a killed run never blocks us), and tell up.sh
	// that leftovers recorded by a harness are a dead one's.
	unlock, err := machineLock(sigs, timeout.C)
	if err != nil {
		say("FAIL: %v", err)
		return 1
	}
	defer unlock()
	os.Setenv("E2E_MACHINE_LOCKED", "1")

	// 3. Bring the cluster up; from here on, always tear down.
	var envPath bytes.Buffer
	code, interrupted := runScript(sigs, timeout.C, "", &envPath, "hack/e2e/up.sh")
	pids := recordedPIDs()
	exit := 0
	if interrupted || code != 0 {
		say("FAIL: bring-up failed (exit %d); logs in %s", code, rel(logs))
		exit = 1
	} else {
		exit = runChild(sigs, timeout.C, strings.TrimSpace(envPath.String()), end)
	}

	// 4. Tear down and check that nothing is left.
	downStart := time.Now()
	signal.Reset(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP) // a second ^C must not stop the teardown
	down := exec.Command("bash", filepath.Join(repoRoot, "hack/e2e/down.sh"))
	down.Dir, down.Stdout, down.Stderr = repoRoot, os.Stdout, os.Stdout
	if err := down.Run(); err != nil {
		say("FAIL: teardown: %v", err)
		exit = 1
	}
	if left := leftovers(pids); len(left) > 0 {
		say("FAIL: teardown left %s", strings.Join(left, "; "))
		exit = 1
	} else {
		say("teardown in %s: no process, network namespace, link or kubeconfig left", time.Since(downStart).Round(100*time.Millisecond))
	}
	say("total %s", time.Since(start).Round(100*time.Millisecond))
	return exit
}

// machineLock takes the machine-wide e2e lock (hack/e2e/lib.sh
// MACHINE_LOCK), waiting while another run holds it. The file is opened
// close-on-exec, so the cluster's daemons never inherit it.
func machineLock(sigs <-chan os.Signal, timeout <-chan time.Time) (unlock func(), err error) {
	const path = "/run/kubectl-proxyrules-e2e.lock"
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening the machine lock %s: %v", path, err)
	}
	if syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) != nil {
		say("another e2e run holds %s: waiting for it to finish", path)
		got := make(chan error, 1)
		go func() { got <- syscall.Flock(int(f.Fd()), syscall.LOCK_EX) }()
		select {
		case err := <-got:
			if err != nil {
				f.Close()
				return nil, fmt.Errorf("locking %s: %v", path, err)
			}
		case s := <-sigs:
			f.Close()
			return nil, fmt.Errorf("%v while waiting for another e2e run", s)
		case <-timeout:
			f.Close()
			return nil, fmt.Errorf("test deadline reached while waiting for another e2e run (%s)", path)
		}
	}
	return func() { syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

func rel(p string) string {
	if r, err := filepath.Rel(repoRoot, p); err == nil {
		return r
	}
	return p
}

// runScript runs a hack/e2e script (stderr to the terminal, or to logFile when
// given, stdout into out) in its own process group, so that a ^C reaches us
// and not the script halfway; on a signal or the deadline the script's group
// gets SIGTERM (its own trap then cleans up).
func runScript(sigs <-chan os.Signal, timeout <-chan time.Time, logFile string, out io.Writer, script string) (code int, interrupted bool) {
	cmd := exec.Command("bash", filepath.Join(repoRoot, script))
	cmd.Dir = repoRoot
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Stdout = out
	if cmd.Stdout == nil {
		cmd.Stdout = os.Stdout
	}
	cmd.Stderr = os.Stdout
	if logFile != "" {
		f, err := os.Create(logFile)
		if err == nil {
			defer f.Close()
			// build.sh prints one line per part it builds: show those too.
			cmd.Stderr = io.MultiWriter(f, lineFilter(os.Stdout, "e2e build:"))
		}
	}
	if err := cmd.Start(); err != nil {
		return 1, false
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			if err != nil {
				if ee, ok := err.(*exec.ExitError); ok {
					return ee.ExitCode(), interrupted
				}
				return 1, interrupted
			}
			return 0, interrupted
		case s := <-sigs:
			say("%v: stopping %s", s, script)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			interrupted = true
		case <-timeout:
			say("test deadline reached: stopping %s", script)
			syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
			interrupted = true
		}
	}
}

// lineFilter passes on only the lines that start with prefix.
func lineFilter(w io.Writer, prefix string) io.Writer {
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if strings.HasPrefix(sc.Text(), prefix) {
				fmt.Fprintln(w, sc.Text())
			}
		}
		io.Copy(io.Discard, pr)
	}()
	return pw
}

// runChild builds the plugin, then runs the tests in a child process with the
// cluster's environment; it returns the child's exit code.
func runChild(sigs <-chan os.Signal, timeout <-chan time.Time, env string, end time.Time) int {
	bin, err := os.MkdirTemp("", "proxyrules-e2e-bin-")
	if err != nil {
		say("FAIL: %v", err)
		return 1
	}
	defer os.RemoveAll(bin)
	build := exec.Command("go", "build", "-o", filepath.Join(bin, "kubectl-proxyrules"), "./cmd/kubectl-proxyrules")
	build.Dir, build.Stdout, build.Stderr = repoRoot, os.Stdout, os.Stdout
	if err := build.Run(); err != nil {
		say("FAIL: building the plugin: %v", err)
		return 1
	}

	// The child's own -test.timeout ends before ours, so that it reports the
	// test that hangs and we still tear down in time.
	args := append([]string{}, os.Args[1:]...)
	if left := time.Until(end) - 30*time.Second; left > 0 {
		args = append(args, "-test.timeout="+left.Round(time.Second).String())
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Stdout, cmd.Stderr, cmd.Stdin = os.Stdout, os.Stderr, nil
	cmd.Env = append(os.Environ(), childEnv+"=1", envFile+"="+env, binEnv+"="+bin)
	if err := cmd.Start(); err != nil {
		say("FAIL: starting the tests: %v", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case err := <-done:
			if err == nil {
				return 0
			}
			if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() > 0 {
				return ee.ExitCode()
			}
			say("FAIL: tests: %v", err)
			return 1
		case s := <-sigs:
			say("%v: stopping the tests, then tearing down", s)
			cmd.Process.Signal(s)
		case <-timeout:
			say("FAIL: test deadline reached: stopping the tests, then tearing down")
			cmd.Process.Signal(syscall.SIGQUIT) // goroutine dump of the hung test
			go func() { time.Sleep(10 * time.Second); cmd.Process.Kill() }()
		}
	}
}

// recordedPIDs reads the pid files of the running cluster (before teardown).
func recordedPIDs() map[string]int {
	pids := map[string]int{}
	files, _ := filepath.Glob(filepath.Join(e2eCache(), "run/pids/*.pid"))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if fs := strings.Fields(string(b)); len(fs) > 0 {
			if pid, err := strconv.Atoi(fs[0]); err == nil {
				pids[strings.TrimSuffix(filepath.Base(f), ".pid")] = pid
			}
		}
	}
	return pids
}

// leftovers lists what teardown left behind: a recorded process still
// running, a node namespace (the fake nodes' shared pr-scale included), the
// bridge or a veth, a kubeconfig, the state dir.
func leftovers(pids map[string]int) []string {
	var left []string
	for name, pid := range pids {
		if err := syscall.Kill(pid, 0); err == nil {
			// The pid may have been recycled: compare the command line.
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			if bytes.Contains(cmdline, []byte(e2eCache())) {
				left = append(left, fmt.Sprintf("process %s (pid %d)", name, pid))
			}
		}
	}
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if f := strings.Fields(line); len(f) > 0 && (f[0] == "node-a" || f[0] == "node-b" || f[0] == "pr-scale" || kernelLabNamespace(f[0])) {
			left = append(left, "network namespace "+f[0])
		}
	}
	bridge := os.Getenv("E2E_BRIDGE")
	if bridge == "" {
		bridge = "prbr0"
	}
	for _, link := range []string{bridge, "pr-node-a", "pr-node-b", "pr-scale"} {
		if exec.Command("ip", "link", "show", link).Run() == nil {
			left = append(left, "link "+link)
		}
	}
	run := filepath.Join(e2eCache(), "run")
	if _, err := os.Stat(run); err == nil {
		left = append(left, "state directory "+rel(run))
	}
	kc, _ := filepath.Glob(filepath.Join(run, "*.kubeconfig"))
	for _, f := range kc {
		left = append(left, "kubeconfig "+rel(f))
	}
	// Any process still running one of the cluster binaries from our cache.
	procs, _ := filepath.Glob("/proc/[0-9]*/exe")
	cache := filepath.Join(e2eCache(), "bin")
	if c := os.Getenv("E2E_BIN_CACHE"); c != "" {
		cache = c
	}
	for _, p := range procs {
		if exe, err := os.Readlink(p); err == nil && strings.HasPrefix(exe, cache) {
			left = append(left, fmt.Sprintf("process %s (%s)", filepath.Base(filepath.Dir(p)), exe))
		}
	}
	return left
}
