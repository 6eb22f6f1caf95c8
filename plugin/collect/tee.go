package collect

import "io"

// A RulesTee sees each ruleset output of a whole read as it streams into
// the bundle, so that the caller parses it while the node is still read
// (issue 33: the parse is no longer a step after the read).
type RulesTee interface {
	// Begin starts the output of the bundle file path, again after a cut
	// connection (the earlier bytes no longer count).
	Begin(path string) io.Writer
	// End says the output of path is complete; ok: its command succeeded.
	End(path string, ok bool)
}

// teeOutput is where runToFiles streams output i: its file, and the tee
// when there is one and the output is a ruleset.
func (c *Collector) teeOutput(cmd NodeCommand, file io.Writer) io.Writer {
	if c.Tee == nil || cmd.Kind != KindRuleset {
		return file
	}
	return io.MultiWriter(file, c.Tee.Begin(cmd.FileName()))
}

// teeEnd ends output i in the tee (see teeOutput).
func (c *Collector) teeEnd(cmd NodeCommand, rc int) {
	if c.Tee != nil && cmd.Kind == KindRuleset {
		c.Tee.End(cmd.FileName(), rc == 0)
	}
}
