// Command kubectl-proxyrules is the kubectl plugin `kubectl proxyrules`.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/proxyrules/kubectl-proxyrules/plugin"
)

func main() {
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	// Ctrl-C or SIGTERM cancels the command, which then deletes its debug
	// pod before exiting; a second signal exits at once (the pod's
	// activeDeadlineSeconds still stops it).
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	err := plugin.NewCmdRoot(streams).ExecuteContext(ctx)
	if err != nil {
		if code, ok := plugin.IsExitError(err); ok {
			os.Exit(code) // the report says why
		}
		if ctx.Err() != nil {
			fmt.Fprintln(os.Stderr, "interrupted")
			os.Exit(130)
		}
		fmt.Fprintf(os.Stderr, "error: %v\n", err)
		os.Exit(plugin.ExitCouldNotRun)
	}
}
