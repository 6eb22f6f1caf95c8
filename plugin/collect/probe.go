package collect

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// askMode learns kube-proxy's mode without an exec: its /proxyMode, else
// its ConfigMap's mode when that says nftables (the read confirms it).
func (c *Collector) askMode(ctx context.Context, w *bundleWriter, metricsPort int, get GetFunc) (Probe, error) {
	c.Progress.Step("probing the node (iptables backend, nftables tables, proxy mode)")
	var p Probe
	var mode bytes.Buffer
	if err := get(ctx, "/proxyMode", &mode); err == nil {
		p.ProxyMode = kubeproxy.Mode(strings.TrimSpace(mode.String()))
		if err := w.write(BundleFile{Path: "proxymode.txt", Kind: KindProxyMode, Command: fmt.Sprintf("GET 127.0.0.1:%d/proxyMode", metricsPort)}, mode.Bytes()); err != nil {
			return p, err
		}
	} else if ctx.Err() != nil {
		return p, ctx.Err()
	} else {
		c.Progress.Step("kube-proxy's /proxyMode did not answer (%s): the mode comes from its ConfigMap or from the node's chains", firstLine(err.Error()))
	}
	// kube-proxy's ConfigMap saying nftables stands in for /proxyMode (the
	// read says whether the table is there): nft and the IPVS reads are not
	// asked.
	if p.ProxyMode == "" && c.configMode == kubeproxy.ModeNFTables {
		p.ProxyMode, p.fromConfig = kubeproxy.ModeNFTables, true
		c.Progress.Step("taking nftables mode from kube-proxy's ConfigMap")
	}
	return p, nil
}

// probeCommands are the commands that learn the iptables backend, whether
// nft runs, and where kube-proxy's rules are, with their outputs.
// iptables-nft -S of one small chain (KUBE-POSTROUTING) is instant and says
// whether kube-proxy wrote rules through iptables-nft; nft's list of the
// sets of kube-proxy's table (NFTKubeProxyTable) whether it wrote its
// nftables tables. Neither loads a rule of a big table. With the mode
// known, nft's tables and the IPVS reads are not asked.
type probeCommands struct {
	cmds          []NodeCommand
	outs          []bytes.Buffer
	rcs           []int
	nftAt, ipvsAt int // where the nftables and ipvsProbeCommands start in cmds; -1: not asked
}

const probeVersion, probeNFTVersion, probeNATv4 = 0, 1, 2 // indices in probeCommands.cmds (probeNATv4, then v6)

func newProbeCommands(p Probe) *probeCommands {
	pc := &probeCommands{nftAt: -1, ipvsAt: -1}
	pc.cmds = []NodeCommand{IPTablesVersion(), NFTVersion(),
		ListChain(kubeproxy.IPv4, kubeproxy.BackendNFT, kubeproxy.TableNAT, kubeproxy.ChainPostrouting),
		ListChain(kubeproxy.IPv6, kubeproxy.BackendNFT, kubeproxy.TableNAT, kubeproxy.ChainPostrouting)}
	if p.ProxyMode == "" {
		pc.nftAt = len(pc.cmds)
		pc.cmds = append(pc.cmds, NFTKubeProxyTable(kubeproxy.IPv4), NFTKubeProxyTable(kubeproxy.IPv6))
		pc.ipvsAt = len(pc.cmds)
		pc.cmds = append(pc.cmds, ipvsProbeCommands()...)
	}
	pc.outs = make([]bytes.Buffer, len(pc.cmds))
	pc.rcs = make([]int, len(pc.cmds))
	for i := range pc.rcs {
		pc.rcs[i] = -1
	}
	return pc
}

func (pc *probeCommands) sink() Sink {
	return Sink{
		Open: func(i int) (io.Writer, error) { pc.outs[i].Reset(); return &pc.outs[i], nil },
		Done: func(i, rc int) { pc.rcs[i] = rc },
	}
}

// finish is p with what the commands found.
func (pc *probeCommands) finish(p Probe) Probe {
	p.Backend = ParseIPTablesVersion(pc.outs[probeVersion].String())
	p.NFTKnown = pc.rcs[probeNFTVersion] == 0
	p.NFTTables = nil
	if p.NFTKnown {
		// The tables kube-proxy's mode (or its table found by NFTKubeProxyTable)
		// implies, and iptables-nft's where its KUBE-POSTROUTING chain
		// exists.
		p.guessed = true
		for i, fam := range ipFamilies {
			if p.ProxyMode == kubeproxy.ModeNFTables || pc.nftAt >= 0 && pc.rcs[pc.nftAt+i] == 0 {
				p.NFTTables = append(p.NFTTables, nftTableName(fam, kubeproxy.NFTTable))
			}
			if pc.rcs[probeNATv4+i] == 0 {
				for _, table := range iptablesTables {
					p.NFTTables = append(p.NFTTables, nftTableName(fam, table))
				}
			}
		}
		sort.Strings(p.NFTTables)
	}
	if p.ProxyMode == "" && (p.hasNFT(kubeproxy.IPv4, kubeproxy.NFTTable) || p.hasNFT(kubeproxy.IPv6, kubeproxy.NFTTable)) {
		p.ProxyMode = kubeproxy.ModeNFTables
	}
	if p.ProxyMode == "" && pc.ipvsAt >= 0 {
		p.detectIPVS(pc.outs[pc.ipvsAt:], pc.rcs[pc.ipvsAt:])
	}
	return p
}

// probeNode runs the probe commands in an exec of their own.
func (c *Collector) probeNode(ctx context.Context, t Target, p Probe) (Probe, error) {
	pc := newProbeCommands(p)
	stderr, err := c.run(ctx, t, pc.cmds, pc.sink())
	if err != nil {
		return p, c.execError(ctx, err, t, stderr)
	}
	return pc.finish(p), nil
}

// probeWithRead says whether the probe's commands ride in the exec that
// reads the rules instead of one of their own: in nftables mode, known
// before any exec, the tables to read are kube-proxy's whatever the probe
// finds, so an exec's round trip is saved on the usual node; what the
// probe finds besides (kube-proxy's chains in iptables-nft, no nft) is
// read after (readProbedRules).
func probeWithRead(p Probe) bool { return p.ProxyMode == kubeproxy.ModeNFTables }

// assumedNFTProbe is what the probe finds on the usual nftables-mode node:
// nft runs, and kube-proxy's tables are the only ones to read there.
func assumedNFTProbe(p Probe) Probe {
	p.NFTKnown, p.guessed = true, true
	p.NFTTables = []string{nftTableName(kubeproxy.IPv4, kubeproxy.NFTTable), nftTableName(kubeproxy.IPv6, kubeproxy.NFTTable)}
	sort.Strings(p.NFTTables)
	return p
}
