package plugin

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// APIVersion is the apiVersion of every machine-readable report.
const APIVersion = "proxyrules.kubectl.io/v1alpha1"

// OutputFormats are the values of -o.
var OutputFormats = []string{"text", "wide", "json", "yaml"}

func validateOutput(o string) error {
	for _, f := range OutputFormats {
		if o == f {
			return nil
		}
	}
	return fmt.Errorf("-o must be one of %s, not %q", strings.Join(OutputFormats, ", "), o)
}

// printMachine writes report as JSON or YAML.
func printMachine(out io.Writer, format string, report any) error {
	data, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	if format == "yaml" {
		if data, err = yaml.JSONToYAML(data); err != nil {
			return err
		}
		_, err = out.Write(data)
		return err
	}
	_, err = fmt.Fprintf(out, "%s\n", data)
	return err
}
