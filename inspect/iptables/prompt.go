package iptables

import (
	"path"
	"strings"

	"github.com/proxyrules/kubectl-proxyrules/kubeproxy"
)

// command is what a pasted shell command line ("root@node:~# iptables -t nat
// -S KUBE-SERVICES") says about the output below it.
type command struct {
	text string
	// iptables is set when the command runs an iptables program (through
	// sudo, kubectl exec, nsenter, ssh …); the fields below describe it.
	iptables bool
	program  string
	family   kubeproxy.Family  // ip6tables: IPv6; iptables: IPv4
	backend  kubeproxy.Backend // iptables-nft / iptables-legacy; unknown otherwise
	table    string            // -t TABLE; "" when not given
	chain    string            // -S CHAIN / -L CHAIN
	save     bool              // iptables-save
	list     bool              // -L
	rules    bool              // -S
	// filtered is set when the output was piped through grep (or head,
	// tail): lines are missing.
	filtered bool
}

// tableOrDefault is the table the command lists: -t, else filter (what
// iptables -S and -L show without -t). "" for iptables-save, whose output
// names its tables.
func (c command) tableOrDefault() string {
	if !c.iptables || c.save {
		return ""
	}
	if c.table != "" {
		return c.table
	}
	return "filter"
}

// knownCommands are the first words of command lines a `# ` prompt may
// start; any other `# …` line is a comment.
var knownCommands = map[string]bool{
	"sudo": true, "doas": true, "cat": true, "grep": true, "egrep": true, "less": true, "more": true,
	"head": true, "tail": true, "kubectl": true, "oc": true, "ssh": true, "docker": true, "crictl": true,
	"nsenter": true, "nft": true, "ip": true, "ipvsadm": true, "echo": true, "watch": true,
	"conntrack": true, "journalctl": true, "ls": true, "cd": true, "sort": true, "sed": true,
	"awk": true, "chroot": true, "minikube": true, "kind": true, "time": true, "env": true,
}

// parseCommandLine recognises a shell prompt followed by a command: "$ …",
// "# …", "user@host:~$ …", "[root@ip-10-0-1-7 ~]# …", "sh-4.2# …",
// "/ # …" (a container's busybox shell), zsh's "user@host ~ % …", "❯ …"
// and "➜  ~ …", any of them after kube-ps1's "(⎈|ctx:ns) " or a
// virtualenv's "(venv) ". A "# " line is a command only when its first word
// is a known command; otherwise it is a comment.
func parseCommandLine(line string) (command, bool) {
	line = strings.TrimSpace(line)
	cut, strict := promptEnd(line)
	if cut < 0 {
		return command{}, false
	}
	text := strings.TrimSpace(line[cut:])
	if text == "" {
		return command{}, false
	}
	// Blogs typeset options with en and em dashes ("iptables –t nat –L").
	text = strings.NewReplacer("\u2013", "-", "\u2014", "-", "\u2212", "-").Replace(text)
	words := strings.Fields(text)
	first := path.Base(words[0])
	_, isIPT := iptablesProgram(first)
	if strict && !isIPT && !knownCommands[first] {
		return command{}, false // a comment
	}
	if strict && isIPT && len(words) > 1 && !strings.HasPrefix(words[1], "-") && words[1] != "|" {
		return command{}, false // "# iptables rules of node-a"
	}
	cmd := command{text: text}
	// The command's own words end at a pipe or list operator, spaced or not
	// ("iptables -L -t nat|grep nginx").
	own := text
	if i := strings.IndexAny(own, "|;&"); i >= 0 {
		own = own[:i]
	}
	words = strings.Fields(own)
	for i, w := range words {
		fam, ok := iptablesProgram(path.Base(w))
		if !ok {
			continue
		}
		cmd.iptables, cmd.program, cmd.family = true, path.Base(w), fam
		switch {
		case strings.Contains(cmd.program, "-nft"):
			cmd.backend = kubeproxy.BackendNFT
		case strings.Contains(cmd.program, "-legacy"):
			cmd.backend = kubeproxy.BackendLegacy
		}
		cmd.save = strings.HasSuffix(cmd.program, "-save")
		cmd.options(words[i+1:])
		break
	}
	if _, piped, ok := strings.Cut(text, "|"); ok {
		for _, w := range strings.Fields(piped) {
			switch path.Base(w) {
			case "grep", "egrep", "head", "tail", "awk", "sed":
				cmd.filtered = true
			}
		}
	}
	return cmd, true
}

// iptablesProgram recognises iptables, ip6tables, their -nft and -legacy
// variants and the -save programs.
func iptablesProgram(name string) (kubeproxy.Family, bool) {
	base := strings.TrimSuffix(name, "-save")
	base = strings.TrimSuffix(strings.TrimSuffix(base, "-nft"), "-legacy")
	switch base {
	case "iptables":
		return kubeproxy.IPv4, true
	case "ip6tables":
		return kubeproxy.IPv6, true
	}
	return "", false
}

// options reads the iptables options that matter for its output: -t, -S, -L
// (also combined, as in -nvL and -tnat) and the chain they list.
func (c *command) options(args []string) {
	wantChain := false
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "|" || strings.HasPrefix(a, "|") || a == ";" || a == "&&" || a == "||" {
			return
		}
		if wantChain {
			wantChain = false
			if !strings.HasPrefix(a, "-") {
				c.chain = a
				continue
			}
		}
		switch {
		case a == "-t" || a == "--table":
			if i+1 < len(args) {
				c.table = args[i+1]
				i++
			}
		case strings.HasPrefix(a, "--table="):
			c.table = strings.TrimPrefix(a, "--table=")
		case a == "-S" || a == "--list-rules":
			c.rules, wantChain = true, true
		case a == "-L" || a == "--list":
			c.list, wantChain = true, true
		case strings.HasPrefix(a, "--"):
		case strings.HasPrefix(a, "-") && len(a) > 1:
			// Combined short options: -nvL, -vnxL, -Lnv, -tnat.
			for j := 1; j < len(a); j++ {
				switch a[j] {
				case 'L':
					c.list, wantChain = true, j == len(a)-1
				case 'S':
					c.rules, wantChain = true, j == len(a)-1
				case 't':
					if j+1 < len(a) {
						c.table = a[j+1:]
					} else if i+1 < len(args) {
						c.table = args[i+1]
						i++
					}
					j = len(a)
				}
			}
		}
	}
}

// IsCommandLine reports whether a line is a pasted shell command line
// ("$ iptables -t nat -S", "root@node:~# iptables-save | grep KUBE"), which
// this package reads as context for the output below it.
func IsCommandLine(line string) bool {
	_, ok := parseCommandLine(line)
	return ok
}

// promptEnd returns the index just after a prompt (pointing at the
// command), or -1 when the line does not start with one; strict is set for
// prompts that a comment or text could also start ("# …", "➜ dir …"): their
// command must be one this package knows. What precedes the sigil ($, #, %,
// ❯) must look like a prompt: nothing, "user@host:dir", "[user@host dir]",
// "user@host dir", "host:~", "sh-4.2", "/", "~" or a path.
func promptEnd(line string) (cut int, strict bool) {
	start := skipPromptGroups(line)
	rest := line[start:]
	if after, ok := strings.CutPrefix(rest, "➜"); ok {
		return start + len(rest) - len(arrowPromptRest(after)), true
	}
	for i := 0; i < len(rest) && i < 120; i++ {
		n := sigilLen(rest[i:])
		if n == 0 {
			continue
		}
		if i+n < len(rest) && rest[i+n] != ' ' && rest[i+n] != '\t' {
			continue
		}
		if !looksLikePrompt(strings.TrimRight(rest[:i], " ")) {
			return -1, false
		}
		return start + i + n, rest[i] == '#'
	}
	return -1, false
}

// sigilLen is the length of the prompt sigil s starts with, 0 for none.
func sigilLen(s string) int {
	switch {
	case s[0] == '$', s[0] == '#', s[0] == '%':
		return 1
	case strings.HasPrefix(s, "❯"):
		return len("❯")
	}
	return 0
}

// skipPromptGroups returns the index after the parenthesised groups a
// prompt may start with: kube-ps1's "(⎈|kind-kind:default) ", a
// virtualenv's or conda's "(venv) ".
func skipPromptGroups(line string) int {
	i := 0
	for strings.HasPrefix(line[i:], "(") {
		end := strings.IndexByte(line[i:], ')')
		if end < 0 || end > 80 || i+end+1 < len(line) && line[i+end+1] != ' ' {
			return i
		}
		i += end + 1
		for i < len(line) && line[i] == ' ' {
			i++
		}
	}
	return i
}

// arrowPromptRest returns what follows oh-my-zsh's default prompt after its
// "➜": "  ~ cmd", "  repo git:(main) ✗ cmd": the directory and the git
// status are passed over.
func arrowPromptRest(s string) string {
	words := strings.Fields(s)
	skip := 1 // the directory
	if len(words) > skip && strings.HasPrefix(words[skip], "git:(") {
		skip++
	}
	if len(words) > skip && words[skip] == "✗" {
		skip++
	}
	if len(words) <= skip {
		return ""
	}
	for _, w := range words[:skip] {
		s = strings.TrimLeft(s, " \t")
		s = s[len(w):]
	}
	return s
}

func looksLikePrompt(p string) bool {
	switch {
	case p == "":
		return true
	case strings.HasPrefix(p, "[") && strings.HasSuffix(p, "]"):
		return strings.Contains(p, "@") || !strings.Contains(p, " ")
	case strings.ContainsAny(p, " \t"):
		return spacedPrompt(strings.Fields(p))
	case strings.Contains(p, "@"), strings.HasPrefix(p, "/"), strings.HasPrefix(p, "~"):
		return true
	case strings.HasPrefix(p, "sh-"), strings.HasPrefix(p, "bash-"), strings.HasPrefix(p, "zsh-"):
		return true
	}
	return hostPath(p)
}

// spacedPrompt: "user@host ~" (zsh's %n@%m %1~), "user@host:~/repo (main)"
// (bash with __git_ps1), "node-a:~", "~/src": a user@host or a path first,
// then at most two short words (a directory, a git branch in parentheses).
func spacedPrompt(fields []string) bool {
	if len(fields) > 3 {
		return false
	}
	head := fields[0]
	if !strings.Contains(head, "@") && !strings.HasPrefix(head, "~") && !strings.HasPrefix(head, "/") && !hostPath(head) {
		return false
	}
	for _, f := range fields[1:] {
		if len(f) > 40 || strings.ContainsAny(f, "\"'=") {
			return false
		}
	}
	return true
}

// hostPath: "node-a:~", "node-a:/etc" (SUSE's root prompt "host:~ #").
func hostPath(p string) bool {
	host, dir, ok := strings.Cut(p, ":")
	return ok && host != "" && !strings.ContainsAny(host, " /") && (strings.HasPrefix(dir, "~") || strings.HasPrefix(dir, "/"))
}
