// Package ipvs reads the IPVS virtual server table as a node shows it, into
// plain data (virtual services, each with its real servers): no Kubernetes
// types; which Service a virtual server belongs to is correlate's question
// (ARCHITECTURE.md).
//
// Forms read, detected from the text (header lines when present, else the
// lines themselves), also pasted (CRLF, indentation, shell prompts and the
// command line itself):
//
//   - /proc/net/ip_vs, as the kernel's ip_vs_info_seq_show prints it
//     (net/netfilter/ipvs/ip_vs_ctl.c): hex addresses and ports, IPv6 in
//     brackets in full, "persistent <timeout> <netmask hex>", "ops", "FWM
//     <mark hex>";
//   - `ipvsadm -Ln` (dotted addresses, decimal ports; also without the
//     version line, as `-Ln -t VIP:PORT` prints it);
//   - `ipvsadm -Ln --stats` and `--rate` (counters instead of scheduler,
//     forward, weight and connections; K/M/G/T suffixes unless --exact);
//   - `ipvsadm -Sn` / `--save` (-A and -a lines).
//
// `ipvsadm -L` without -n prints host and port names: those lines are
// reported, not guessed at. So are the columns of --thresholds,
// --persistent-conn and --tun-info, which this package does not read.
//
// A paste of several listings (ipvsadm -Ln, then -Sn of the same table)
// gives each listing's services in order, Format "mixed": which line of one
// form is which of another is the caller's to join.
//
// Bounds (limits.go): a line over MaxLineBytes is skipped without being
// held, reading stops at MaxBytes, and services and real servers past
// their caps are counted, not kept. What a cap left out is in
// Table.Truncated; a line not understood is quoted in Table.Warnings (the
// first few) and the rest kept: a reader returns what it could read, and
// its error is only the io.Reader's.
package ipvs
