// Command fixturegen runs kube-proxy's real proxier code (iptables mode against
// the fake iptables of k8s.io/kubernetes/pkg/util/iptables/testing, nftables mode
// against the real kernel inside a throw-away network namespace) over fixed
// scenarios and writes the golden fixtures under testdata/fixtures/.
//
// It is driven by hack/gen-fixtures.sh; see there for the full pipeline.
// The subcommands that touch the kernel refuse to run in the host's network
// namespace.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

func usage() {
	fmt.Fprintf(os.Stderr, `usage: fixturegen <command> [flags]

commands:
  list                          print the scenarios this build (%s) generates: "name mode,mode flag,flag|-"
  objects  -scenario S -out DIR write objects.json and meta.json
  iptables -scenario S -out DIR run the iptables proxiers (fake iptables); writes iptables/restore-*.txt, metrics-iptables.txt
  nftables -scenario S -out DIR run the nftables proxiers (real kernel; must be inside a netns); writes nftables/*, metrics-nftables.txt
  nfacct-ensure                 create kube-proxy's nfacct counters (must be inside a netns)
  config   -scenario S -out DIR write kube-proxy-configmap-<mode>.yaml (kubeadm's ConfigMap) and configz-<mode>.json (kube-proxy's /configz)
  ipvs     -scenario S -out DIR run the IPVS proxiers (kube-proxy's fakes; must be inside a netns); writes ipvs/* (-tags kpipvs build only)
  expected -scenario S -out DIR derive expected.json from the dumps in DIR
  validate -out DIR             check the knftables dumps parse with knftables.Fake.ParseDump
`, versionTag)
	os.Exit(2)
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd := os.Args[1]
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	scenarioName := fs.String("scenario", "", "scenario name")
	out := fs.String("out", "", "fixture directory of the scenario")
	_ = fs.Parse(os.Args[2:])

	ctx := context.Background()
	var sc *Scenario
	needScenario := func() {
		sc = findScenario(*scenarioName)
		if sc == nil {
			fatalf("unknown scenario %q", *scenarioName)
		}
		if *out == "" {
			fatalf("-out is required")
		}
	}

	var err error
	switch cmd {
	case "list":
		for _, s := range scenarios {
			if s.Version == versionTag {
				fmt.Printf("%s %s %s\n", s.Name, strings.Join(s.Modes, ","), s.flags())
			}
		}
	case "objects":
		needScenario()
		err = writeObjects(sc, *out)
	case "iptables":
		needScenario()
		mustBeInNetns()
		err = runIPTables(ctx, sc, *out)
	case "nftables":
		needScenario()
		mustBeInNetns()
		err = runNFTables(ctx, sc, *out)
	case "nfacct-ensure":
		mustBeInNetns()
		err = nfacctEnsure()
	case "config":
		needScenario()
		if configCmd == nil {
			fatalf("config: this binary was built without -tags kpconfig (hack/gen-fixtures.sh builds fixturegen-<version>-config)")
		}
		err = configCmd(sc, *out)
	case "ipvs":
		needScenario()
		if ipvsCmd == nil {
			fatalf("ipvs: this binary was built without -tags kpipvs (hack/gen-fixtures-ipvs.sh builds fixturegen-v1.37-ipvs)")
		}
		mustBeInNetns()
		err = ipvsCmd(sc, *out)
	case "expected":
		needScenario()
		err = writeExpected(sc, *out)
	case "validate":
		err = validate(*out)
	default:
		usage()
	}
	if err != nil {
		fatalf("%s: %v", cmd, err)
	}
}

// configCmd is `fixturegen config`, set by config.go in -tags kpconfig builds.
var configCmd func(sc *Scenario, out string) error

// ipvsCmd is `fixturegen ipvs`, set by ipvs.go in -tags kpipvs builds (kept
// out of the other builds so their fixtures cannot change).
var ipvsCmd func(sc *Scenario, out string) error

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "fixturegen: "+format+"\n", args...)
	os.Exit(1)
}

// mustBeInNetns refuses to touch the kernel (nftables rules, conntrack, nfacct,
// health-check listeners) unless the process runs in a named network namespace
// (one created with `ip netns add`, entered with `ip netns exec`).
func mustBeInNetns() {
	var self syscall.Stat_t
	if err := syscall.Stat("/proc/self/ns/net", &self); err != nil {
		fatalf("cannot stat own network namespace: %v", err)
	}
	entries, _ := os.ReadDir("/var/run/netns")
	for _, e := range entries {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join("/var/run/netns", e.Name()), &st); err == nil && st.Dev == self.Dev && st.Ino == self.Ino {
			return
		}
	}
	fatalf("refusing to run outside a named network namespace; run under `ip netns exec NAME`")
}
