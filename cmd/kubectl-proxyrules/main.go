// Command kubectl-proxyrules is the kubectl plugin `kubectl proxyrules`.
package main

import (
	"fmt"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/plugin"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	if err := plugin.NewCmdRoot(streams).Execute(); err != nil {
		if code, ok := plugin.IsExitError(err); ok {
			os.Exit(code) // the report says why
		}
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(plugin.ExitCouldNotRun)
	}
}
