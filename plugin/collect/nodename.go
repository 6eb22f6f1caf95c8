package collect

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// CheckNodeName refuses a node name read from a file (a bundle's or a
// sweep's manifest) that no cluster could hold: node names become folder
// names (DIR/nodes/NODE), labels and lines of output, so "../x", a newline
// or an escape sequence is refused at the door, not only escaped on print.
func CheckNodeName(name string) error {
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return fmt.Errorf("node %s is not a valid node name (%s): node names become folder names and labels, so it is refused", quoteName(name), errs[0])
	}
	return nil
}

// quoteName quotes a name for an error, escaped and cut short: the name
// is hostile when it gets here.
func quoteName(name string) string {
	const most = 80
	if len(name) > most {
		return fmt.Sprintf("%q… (%d bytes)", strings.ToValidUTF8(name[:most], ""), len(name))
	}
	return fmt.Sprintf("%q", name)
}
