package inspect

import "errors"

// MaxLineLength bounds a single input line. kube-proxy's longest lines are
// a few hundred bytes; nft can print long element lists on one line.
const MaxLineLength = 16 << 20

// errBinary is returned for input that contains NUL bytes.
var errBinary = errors.New("input looks binary (NUL byte)")
