// Package scan holds what the rule readers share: a line reader that
// bounds line length and refuses binary input, and a string arena.
package scan

import "errors"

// MaxLineLength bounds a single input line. kube-proxy's longest lines are
// a few hundred bytes; nft can print long element lists on one line.
const MaxLineLength = 16 << 20

// ErrBinary is returned for input that contains NUL bytes.
var ErrBinary = errors.New("input looks binary (NUL byte)")
