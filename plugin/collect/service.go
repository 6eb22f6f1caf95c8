package collect

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/proxyrules/kubectl-proxyrules/correlate"
)

// maxRounds bounds the service-scoped read: round 1 reads the Service's
// chains, later rounds the chains those jump to that its objects do not
// name (endpoints already gone from the slices).
const maxRounds = 4

// readService reads only one Service's chains, with their entry chains, when
// that is faster than the whole tables (iptables on the nf_tables backend,
// facts: 0.06 s for KUBE-SERVICES against minutes for iptables-nft-save on
// a big node). It returns false when the whole tables should be read.
func (c *Collector) readService(ctx context.Context, t Target, probe Probe) (bool, error) {
	if !ChainPlan(probe) || c.objects == nil {
		return false, nil
	}
	var sps []*correlate.ServicePort
	v4, v6 := false, false
	for _, sp := range c.objects.ServicePorts() {
		if sp.Namespace != c.ServiceNamespace || sp.Name != c.ServiceName {
			continue
		}
		sps = append(sps, sp)
		for _, ip := range sp.ClusterIPs {
			if strings.Contains(ip, ":") {
				v6 = true
			} else {
				v4 = true
			}
		}
	}
	if !v6 {
		v4 = true // no cluster IP (a headless Service): entry chains only
	}
	c.man.Scope = "service " + c.ServiceNamespace + "/" + c.ServiceName
	names := correlate.ChainsOfService(sps)
	for _, fam := range []struct {
		prog   string
		wanted bool
	}{{"iptables-nft", v4}, {"ip6tables-nft", v6}} {
		if !fam.wanted {
			continue
		}
		if err := c.readChains(ctx, t, fam.prog, names); err != nil {
			return true, err
		}
	}
	return true, nil
}

// readChains reads the chains with `PROG -t TABLE -S CHAIN` into one
// save-format file per table (*nat … COMMIT), which every parser reads.
func (c *Collector) readChains(ctx context.Context, t Target, prog string, serviceChains []string) error {
	files := map[string]*os.File{}
	sizes := map[string]int64{}
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	fileOf := func(table string) (*os.File, error) {
		if f := files[table]; f != nil {
			return f, nil
		}
		f, err := os.Create(filepath.Join(c.Dir, prog+"-"+table+"-chains.txt"))
		if err != nil {
			return nil, err
		}
		files[table] = f
		n, err := fmt.Fprintf(f, "# kubectl-proxyrules: chains read one by one with %s -t %s -S\n*%s\n", prog, table, table)
		sizes[table] += int64(n)
		return f, err
	}
	owned := map[string]bool{}
	for _, n := range serviceChains {
		owned[n] = true
	}
	read := map[string]bool{}
	counts := map[string]int{}
	cmds := FirstChains(prog, serviceChains)
	start := time.Now()
	for round := 1; len(cmds) > 0 && round <= maxRounds; round++ {
		outs := make([]bytes.Buffer, len(cmds))
		for _, cmd := range cmds {
			read[cmd.Argv[2]+" "+cmd.Argv[4]] = true
		}
		c.Progress.Step("reading %d chains with %s -S (round %d)", len(cmds), prog, round)
		stderr, err := c.Runner.Run(ctx, t, cmds, Sink{
			Open: func(i int) (io.Writer, error) {
				f, err := fileOf(cmds[i].Argv[2])
				if err != nil {
					return nil, err
				}
				return io.MultiWriter(f, &outs[i]), nil
			},
			Done: func(i, rc int) {
				// rc 1: no such chain, which the analysis reports as missing.
				sizes[cmds[i].Argv[2]] += int64(outs[i].Len())
				if outs[i].Len() > 0 {
					counts[cmds[i].Argv[2]]++
				}
			},
		})
		if err != nil {
			return c.execError(ctx, err, t, stderr)
		}
		var next []NodeCommand
		for i, cmd := range cmds {
			if cmd.Argv[2] != "nat" {
				continue
			}
			for _, target := range ReferencedChains(outs[i].Bytes(), owned) {
				if !read["nat "+target] {
					read["nat "+target] = true
					owned[target] = true
					next = append(next, ListChain(prog, "nat", target))
				}
			}
		}
		cmds = next
	}
	for _, table := range []string{"nat", "filter"} {
		f := files[table]
		if f == nil {
			continue
		}
		if _, err := io.WriteString(f, "COMMIT\n"); err != nil {
			return err
		}
		c.man.Files = append(c.man.Files, BundleFile{
			Path: filepath.Base(f.Name()), Kind: KindRuleset, Partial: true,
			Command: fmt.Sprintf("%s -t %s -S CHAIN (%d chains present)", prog, table, counts[table]),
			Bytes:   sizes[table] + int64(len("COMMIT\n")), Seconds: time.Since(start).Seconds(),
		})
	}
	return nil
}
