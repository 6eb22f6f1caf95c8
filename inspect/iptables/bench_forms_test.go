package iptables

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/proxyrules/kubectl-proxyrules/internal/synth"
)

// The forms of small-v1.37 (about 200 nat rules) as the real tools list
// them; BenchmarkReadSave is the iptables-save form of the same rules.
func benchmarkRead(b *testing.B, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := Read(bytes.NewReader(data), "bench", Options{}); err != nil {
			b.Fatal(err)
		}
	}
}

func formFile(b *testing.B, name string) []byte {
	data, err := os.ReadFile(filepath.Join("testdata", "forms", "small-v1.37", name))
	if err != nil {
		b.Fatal(err)
	}
	return data
}

func BenchmarkReadSave(b *testing.B)    { benchmarkRead(b, formFile(b, "ipv4-save.txt")) }
func BenchmarkReadRules(b *testing.B)   { benchmarkRead(b, formFile(b, "ipv4-S-nat.txt")) }
func BenchmarkReadListing(b *testing.B) { benchmarkRead(b, formFile(b, "ipv4-Lvx-nat.txt")) }

// BenchmarkReadRulesLarge: `iptables -t nat -S` of the 5,000 Services × 20
// endpoints node of BenchmarkParseAndAttribute (~310k rules), against
// BenchmarkReadSaveLarge, the iptables-save form of the same rules.
func BenchmarkReadRulesLarge(b *testing.B) { benchmarkRead(b, largeDump(b, true)) }
func BenchmarkReadSaveLarge(b *testing.B)  { benchmarkRead(b, largeDump(b, false)) }

func largeDump(b *testing.B, rulesForm bool) []byte {
	var save bytes.Buffer
	if err := (synth.Cluster{Services: 5000, Endpoints: 20}).WriteIPTablesSave(&save); err != nil {
		b.Fatal(err)
	}
	if !rulesForm {
		return save.Bytes()
	}
	// The nat table as iptables -S prints it: policies, -N, -A.
	var out bytes.Buffer
	inNAT := false
	sc := bufio.NewScanner(&save)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "*nat":
			inNAT = true
		case !inNAT || line == "COMMIT" || strings.HasPrefix(line, "#"):
			inNAT = inNAT && line != "COMMIT"
		case strings.HasPrefix(line, ":"):
			name, policy, _ := strings.Cut(line[1:], " ")
			if policy, _, _ = strings.Cut(policy, " "); policy != "-" {
				out.WriteString("-P " + name + " " + policy + "\n")
			} else {
				out.WriteString("-N " + name + "\n")
			}
		default:
			out.WriteString(line + "\n")
		}
	}
	return out.Bytes()
}
