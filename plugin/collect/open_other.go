//go:build !unix

package collect

// oNonblock: Windows has no FIFOs that open blocks on.
const oNonblock = 0
