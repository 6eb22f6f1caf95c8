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
	// Ctrl-C, SIGTERM or SIGHUP (the terminal closed) cancels the command,
	// which then deletes its debug pod and what it extracted before
	// exiting (a parse or an analysis is abandoned at once); a second
	// signal exits at once (the pod's activeDeadlineSeconds still stops
	// it), removing the temporary files.
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		<-sigs
		cancel()
		<-sigs
		plugin.RemoveTemporaryFiles()
		fmt.Fprintln(os.Stderr, "interrupted")
		os.Exit(130)
	}()
	err := plugin.NewCmdRoot(streams).ExecuteContext(ctx)
	if err != nil {
		if code, ok := plugin.IsExitError(err); ok {
			os.Exit(code) // the report says why
		}
		if ctx.Err() != nil {
			// A parse cut short is still reading what a bundle
			// extracted: its files go here, not when it ends.
			plugin.RemoveTemporaryFiles()
			fmt.Fprintln(os.Stderr, "interrupted")
			os.Exit(130)
		}
		fmt.Fprintf(os.Stderr, "error: %s\n", plugin.ErrorText(err))
		os.Exit(plugin.ExitCouldNotRun)
	}
}
