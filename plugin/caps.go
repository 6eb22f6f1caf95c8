package plugin

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/proxyrules/kubectl-proxyrules/inspect"
	"github.com/proxyrules/kubectl-proxyrules/plugin/collect"
)

// Every input is read through a cap on its size, enforced where it is
// opened (open, and a bundle's extraction), so that a crafted file can cost
// no more than a small multiple of the cap in memory and disk, whichever
// parser reads it. The defaults are some ten times what a node with 5,000
// Services gives (its nat table is some 50 MB as text, its objects some
// 40 MB, its metrics under 1 MB); --max-input-size changes them.

// Kinds of input, as --max-input-size names them.
const (
	capDump    = "dump"    // --from-dump and a bundle's rulesets (text, nft JSON)
	capObjects = "objects" // --from-objects and a bundle's objects.json
	capMetrics = "metrics"
	capConfig  = "config"
	capBundle  = "bundle" // all the files of one .tar.gz together
	// capConntrack: --from-conntrack, --from-conntrack-stats, --from-sysctls
	// and a bundle's conntrack files (a whole table of a million entries
	// is some 200 MB; collect sends at most collect.MaxConntrackEntries).
	capConntrack = "conntrack"
)

// inputCaps are the most bytes an input of each kind may hold.
type inputCaps map[string]int64

var defaultCaps = inputCaps{
	capDump:      1 << 30,
	capObjects:   256 << 20,
	capMetrics:   16 << 20,
	capConfig:    8 << 20,
	capBundle:    2 << 30,
	capConntrack: 256 << 20,
}

// String lists the caps as --max-input-size takes them.
func (c inputCaps) String() string {
	var parts []string
	for _, k := range []string{capDump, capObjects, capMetrics, capConfig, capConntrack, capBundle} {
		parts = append(parts, k+"="+quantity(c[k]))
	}
	return strings.Join(parts, ",")
}

func quantity(n int64) string {
	return resource.NewQuantity(n, resource.BinarySI).String()
}

// parseCaps are the defaults with --max-input-size (maxSize) applied.
func parseCaps(maxSize string) (inputCaps, error) {
	caps := inputCaps{}
	for k, v := range defaultCaps {
		caps[k] = v
	}
	for _, kv := range strings.Split(maxSize, ",") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, v, ok := strings.Cut(strings.TrimSpace(kv), "=")
		if _, known := defaultCaps[k]; !ok || !known {
			return nil, fmt.Errorf("--max-input-size %q: want KIND=SIZE,... with kinds %s, %s, %s, %s, %s, %s (e.g. objects=512Mi)", kv, capDump, capObjects, capMetrics, capConfig, capConntrack, capBundle)
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Value() <= 0 {
			return nil, fmt.Errorf("--max-input-size %s=%s: want a size such as 512Mi or 2Gi", k, v)
		}
		caps[k] = q.Value()
	}
	return caps, nil
}

// kindOf is the kind of input name was given as (a bundle's files are in
// the same lists).
func (s *inputSet) kindOf(name string) string {
	switch {
	case slices.Contains(s.Objects, name):
		return capObjects
	case slices.Contains(s.Metrics, name):
		return capMetrics
	case slices.Contains(s.Config, name):
		return capConfig
	case slices.Contains(s.Conntrack, name), slices.Contains(s.ConntrackStats, name), slices.Contains(s.Sysctls, name):
		return capConntrack
	}
	return capDump // --from-dump also reads metrics and configuration dumps
}

// bundleLimits are the caps for reading a bundle: its files by kind, the
// objects not at all when --from-objects replaces them.
func (c inputCaps) bundleLimits(userObjects bool) collect.Limits {
	return collect.Limits{
		File: func(kind string) int64 {
			switch kind {
			case collect.KindRuleset:
				return c[capDump]
			case collect.KindObjects:
				if userObjects {
					return 0
				}
				return c[capObjects]
			case collect.KindMetrics:
				return c[capMetrics]
			case collect.KindConfig:
				return c[capConfig]
			case collect.KindConntrack, collect.KindConntrackStats, collect.KindSysctls:
				return c[capConntrack]
			}
			return 0 // never parsed: not extracted
		},
		Total: c[capBundle],
	}
}

// explain adds to a cap's error how to raise the cap.
func (c inputCaps) explain(err error) error {
	var le *collect.LimitError
	if !errors.As(err, &le) {
		return err
	}
	kind := capBundle
	switch le.Kind {
	case collect.KindRuleset:
		kind = capDump
	case collect.KindObjects:
		kind = capObjects
	case collect.KindMetrics:
		kind = capMetrics
	case collect.KindConfig:
		kind = capConfig
	case collect.KindConntrack, collect.KindConntrackStats, collect.KindSysctls:
		kind = capConntrack
	}
	return fmt.Errorf("%w: if it is genuine, raise the cap with --max-input-size %s=%s", err, kind, quantity(2*c[kind]))
}

// cappedReader fails a read past the cap on its kind of input.
type cappedReader struct {
	io.ReadCloser
	left, limit  int64
	kind, source string
}

func (r *cappedReader) Read(p []byte) (int, error) {
	if r.left < 0 {
		return 0, r.tooLarge()
	}
	if int64(len(p)) > r.left+1 {
		p = p[:r.left+1]
	}
	n, err := r.ReadCloser.Read(p)
	r.left -= int64(n)
	if r.left < 0 {
		return n, r.tooLarge()
	}
	return n, err
}

// SizeHint is the size of the file read, when it says, and never more
// than the cap (a reader that holds its input whole allocates it once:
// a huge file must meet the cap's error, not an allocation of its size).
func (r *cappedReader) SizeHint() int64 {
	return min(inspect.InputSize(r.ReadCloser), max(r.left+1, 0))
}

func (r *cappedReader) tooLarge() error {
	return fmt.Errorf("%s is larger than the cap of %s on %s inputs: if it is genuine, raise it with --max-input-size %s=%s",
		r.source, collect.HumanBytes(r.limit), r.kind, r.kind, quantity(2*r.limit))
}
