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
	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// maxRounds bounds the service-scoped read: round 1 reads the Service's
// chains, later rounds the chains those jump to that its objects do not
// name (endpoints already gone from the slices).
const maxRounds = 4

// readService reads only one Service's chains, with their entry chains, when
// that is faster than the whole tables (iptables on the nf_tables backend,
// facts: 0.06 s for KUBE-SERVICES against minutes for iptables-nft-save on
// a big node). It returns false when the whole tables should be read.
func (c *Collector) readService(ctx context.Context, w *bundleWriter, t Target, probe Probe, objects *correlate.Objects) (bool, error) {
	if !ChainPlan(probe) || objects == nil {
		return false, nil
	}
	var sps []*correlate.ServicePort
	wanted := map[kubeproxy.Family]bool{}
	for _, sp := range objects.ServicePorts() {
		if sp.Namespace != c.ServiceNamespace || sp.Name != c.ServiceName {
			continue
		}
		sps = append(sps, sp)
		for _, ip := range sp.ClusterIPs {
			wanted[kubeproxy.FamilyOfIP(ip)] = true
		}
	}
	if !wanted[kubeproxy.IPv6] {
		wanted[kubeproxy.IPv4] = true // no cluster IP (a headless Service): entry chains only
	}
	names := correlate.ChainsOfService(sps)
	if len(names) > maxScopedChains {
		w.warn("service %s/%s has %d chains, more than a chain-by-chain read is worth (%d): read the whole tables instead", c.ServiceNamespace, c.ServiceName, len(names), maxScopedChains)
		return false, nil
	}
	w.man.Scope = "service " + c.ServiceNamespace + "/" + c.ServiceName
	w.mu.Lock()
	files, created := len(w.man.Files), len(w.created)
	w.mu.Unlock()
	for _, fam := range ipFamilies {
		if !wanted[fam] {
			continue
		}
		err := c.readChains(ctx, w, t, fam, names)
		if err != nil && argListTooLong(err) {
			// Even one batch was too long for this node's runtime: the
			// whole tables hold the same chains.
			w.forget(files, created)
			w.man.Scope = "full"
			w.warn("the service's chains could not be read chain by chain (%s): read the whole tables instead", firstLine(err.Error()))
			return false, nil
		}
		if err != nil {
			return true, err
		}
	}
	return true, nil
}

// maxScopedChains is where reading chain by chain stops paying: each is one
// iptables-nft run of some milliseconds, a whole-table save some seconds.
const maxScopedChains = 20000

// argListTooLong says whether the node refused a script as too long
// (E2BIG from execve).
func argListTooLong(err error) bool {
	return strings.Contains(strings.ToLower(err.Error()), "argument list too long")
}

// chainWalk is where a service-scoped read of one family stands: which
// chains have been listed, and whose jumps are followed.
type chainWalk struct {
	listed map[string]bool // "TABLE CHAIN"
	// owned are the nat chains whose jumps lead to more of the Service's
	// chains: its own, and what they jump to.
	owned map[string]bool
}

func newChainWalk(serviceChains []string) *chainWalk {
	w := &chainWalk{listed: map[string]bool{}, owned: map[string]bool{}}
	for _, n := range serviceChains {
		w.owned[n] = true
	}
	return w
}

// list records the commands of a round as listed.
func (w *chainWalk) list(cmds []NodeCommand) {
	for _, cmd := range cmds {
		w.listed[cmd.Table+" "+cmd.Chain] = true
	}
}

// next takes a round's nat commands with their outputs and lists the
// chains the owned ones jump to that no round has listed yet. Only owned
// outputs are parsed: the fixed chains, listed in round 1, are not
// followed (and KUBE-SERVICES is big on a big node).
//
// A target that is no chain name the plugin may list (a foreign KUBE- chain
// with a longer or odd name) is returned in skipped, not read: the rest of
// the Service is read all the same.
func (w *chainWalk) next(fam kubeproxy.Family, nat []NodeCommand, outs [][]byte) (next []NodeCommand, skipped []string, err error) {
	var ownedOuts [][]byte
	for i, cmd := range nat {
		if w.owned[cmd.Chain] {
			ownedOuts = append(ownedOuts, outs[i])
		}
	}
	if len(ownedOuts) == 0 {
		return nil, nil, nil
	}
	table, err := parseListedChains(kubeproxy.TableNAT, ownedOuts...)
	if err != nil {
		return nil, nil, err
	}
	for _, target := range ReferencedChains(table, w.owned) {
		if w.listed[kubeproxy.TableNAT+" "+target] {
			continue
		}
		w.listed[kubeproxy.TableNAT+" "+target] = true
		cmd := ListChain(fam, kubeproxy.BackendNFT, kubeproxy.TableNAT, target)
		if cmd.Check() != nil {
			skipped = append(skipped, target)
			continue
		}
		w.owned[target] = true
		next = append(next, cmd)
	}
	return next, skipped, nil
}

// readChains reads the chains with `iptables-nft -t TABLE -S CHAIN` into one
// save-format file per table (*nat … COMMIT), which every parser reads.
func (c *Collector) readChains(ctx context.Context, w *bundleWriter, t Target, fam kubeproxy.Family, serviceChains []string) error {
	prog := iptablesProgram(fam, kubeproxy.BackendNFT)
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
		f, err := w.create(prog + "-" + table + "-chains.txt")
		if err != nil {
			return nil, err
		}
		files[table] = f
		n, err := fmt.Fprintf(f, "# kubectl-proxyrules: chains read one by one with %s -t %s -S\n*%s\n", prog, table, table)
		sizes[table] += int64(n)
		return f, err
	}
	walk := newChainWalk(serviceChains)
	counts := map[string]int{}
	cmds := FirstChains(fam, serviceChains)
	walk.list(cmds)
	start := time.Now()
	for round := 1; len(cmds) > 0 && round <= maxRounds; round++ {
		outs := make([]bytes.Buffer, len(cmds))
		c.Progress.Step("reading %d chains with %s -S (round %d)", len(cmds), prog, round)
		stderr, err := c.run(ctx, t, cmds, Sink{
			Open: func(i int) (io.Writer, error) {
				f, err := fileOf(cmds[i].Table)
				if err != nil {
					return nil, err
				}
				return io.MultiWriter(f, &outs[i]), nil
			},
			Done: func(i, rc int) {
				// rc 1: no such chain, which the analysis reports as missing.
				sizes[cmds[i].Table] += int64(outs[i].Len())
				if outs[i].Len() > 0 {
					counts[cmds[i].Table]++
				}
			},
		})
		if err != nil {
			return c.execError(ctx, err, t, stderr)
		}
		var nat []NodeCommand
		var natOuts [][]byte
		for i, cmd := range cmds {
			if cmd.Table == kubeproxy.TableNAT {
				nat, natOuts = append(nat, cmd), append(natOuts, outs[i].Bytes())
			}
		}
		var skipped []string
		if cmds, skipped, err = walk.next(fam, nat, natOuts); err != nil {
			return err
		}
		for _, chain := range skipped {
			w.warn("%s: the service's chains jump to %.60q, which is not a chain name the plugin may list (KUBE- and at most 24 more letters, digits or dashes): not read", fam, chain)
		}
	}
	for _, table := range []string{kubeproxy.TableNAT, kubeproxy.TableFilter, kubeproxy.TableMangle} {
		f := files[table]
		if f == nil {
			continue
		}
		if _, err := io.WriteString(f, "COMMIT\n"); err != nil {
			return err
		}
		w.add(BundleFile{
			Path: filepath.Base(f.Name()), Kind: KindRuleset, Partial: true,
			Command: fmt.Sprintf("%s -t %s -S CHAIN (%d chains present)", prog, table, counts[table]),
			Bytes:   sizes[table] + int64(len("COMMIT\n")), Seconds: time.Since(start).Seconds(),
		})
	}
	return nil
}

// familyOfIP is the family of a cluster IP.
