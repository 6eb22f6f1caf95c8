package plugin

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// Version, Commit and Date are stamped at build time by `make dist`:
//
//	-ldflags "-X github.com/proxyrules/kubectl-proxyrules/plugin.Version=v0.1.0 ..."
var (
	// Version is the release, a v-prefixed semantic version.
	Version = "v0.0.0-dev"
	// Commit is the git commit the binary was built from.
	Commit = "unknown"
	// Date is when that commit was made (RFC 3339, UTC); reproducible builds
	// stamp the commit date, not the wall clock.
	Date = "unknown"
)

// VersionInfo is the machine-readable report of `version`.
type VersionInfo struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Version    string `json:"version"`
	Commit     string `json:"commit"`
	Date       string `json:"date"`
	GoVersion  string `json:"goVersion"`
	Platform   string `json:"platform"`
}

// GetVersion reports the stamped version. A binary built without the
// ldflags (go install …@v0.1.0, go build) falls back to what the Go
// toolchain recorded: the module version and the VCS revision.
func GetVersion() VersionInfo {
	v := VersionInfo{
		APIVersion: APIVersion,
		Kind:       "Version",
		Version:    Version,
		Commit:     Commit,
		Date:       Date,
		GoVersion:  runtime.Version(),
		Platform:   runtime.GOOS + "/" + runtime.GOARCH,
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		if v.Version == "v0.0.0-dev" && strings.HasPrefix(bi.Main.Version, "v") {
			v.Version = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && v.Commit == "unknown":
				v.Commit = s.Value
			case s.Key == "vcs.time" && v.Date == "unknown":
				v.Date = s.Value
			}
		}
	}
	return v
}

// String is the one line --version prints.
func (v VersionInfo) String() string {
	return fmt.Sprintf("%s (commit %s, built %s, %s, %s)", v.Version, v.Commit, v.Date, v.GoVersion, v.Platform)
}

// VersionOptions are the options of `version`.
type VersionOptions struct {
	genericiooptions.IOStreams
	Output string
}

const versionExample = `  # Which release is installed?
  %[1]s version

  # The same, for a bug report or a script
  %[1]s version -o json

  # Only the version
  %[1]s --version`

// NewCmdVersion builds `version`.
func NewCmdVersion(name string, streams genericiooptions.IOStreams) *cobra.Command {
	o := &VersionOptions{IOStreams: streams, Output: "text"}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print the plugin's version, commit, build date and platform",
		Long: `Print the version of the plugin, the git commit and date it was built from, the Go
version and the platform. Paste the JSON form into bug reports. It needs no
cluster.`,
		Example: fmt.Sprintf(versionExample, name),
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := o.Validate(); err != nil {
				return err
			}
			return o.Run()
		},
	}
	cmd.Flags().StringVarP(&o.Output, "output", "o", o.Output, "output format: text, wide (the text), json or yaml")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "wide", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// Validate checks -o.
func (o *VersionOptions) Validate() error {
	switch o.Output {
	case "text", "json", "yaml":
		return nil
	case "wide": // kubectl's -o wide: the text, there being nothing wider
		o.Output = "text"
		return nil
	}
	return fmt.Errorf("-o must be one of text, wide, json, yaml, not %q", o.Output)
}

// Run prints the version.
func (o *VersionOptions) Run() error {
	return writeVersion(o.Out, o.Output, GetVersion())
}

func writeVersion(out io.Writer, format string, v VersionInfo) error {
	if format == "json" || format == "yaml" {
		return printMachine(out, format, v)
	}
	_, err := fmt.Fprintf(out, "Version:    %s\nCommit:     %s\nDate:       %s\nGo version: %s\nPlatform:   %s\n",
		v.Version, v.Commit, v.Date, v.GoVersion, v.Platform)
	return err
}
