package ipset

import (
	"net/netip"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/inspect/internal/scan"
)

// IsIPSetLine says whether one line (spaces and a paste's prompt trimmed or
// not) is one only an ipset listing prints: a save's create line (its
// third word a set type, where a knftables dump has a table or chain
// family), an add line whose member starts with an address or a port, a
// list's Type:, Header:, Size in memory: or Number of entries: line, or
// the command that printed one.
func IsIPSetLine(line string) bool {
	l := scan.TrimPasted(line)
	f := strings.Fields(l)
	if len(f) < 2 {
		return false
	}
	switch {
	case f[0] == "create":
		return len(f) >= 3 && isType(f[2])
	case f[0] == "add":
		return len(f) >= 3 && looksLikeMember(f[2])
	case f[0] == "Type:":
		return isType(f[1])
	case f[0] == "Header:":
		return len(f) >= 3 && (f[1] == "family" && strings.HasPrefix(f[2], "inet") || f[1] == "range")
	case strings.HasPrefix(l, "Size in memory: "), strings.HasPrefix(l, "Number of entries: "):
		return number(f[len(f)-1]) >= 0
	}
	return isCommand(l)
}

// looksLikeMember: an address or network first (hash types) or a port
// (bitmap:port); knftables' add lines have a keyword there ("ip", "inet").
func looksLikeMember(s string) bool {
	first, _, _ := strings.Cut(s, ",")
	if _, err := netip.ParseAddr(first); err == nil {
		return true
	}
	if _, err := netip.ParsePrefix(first); err == nil {
		return true
	}
	return number(s) >= 0 && number(s) <= 65535
}
