package collect

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"
)

// A sweep folder, written by `collect --all-nodes`: the objects once, and
// one bundle per node without them.
//
//	DIR/sweep.json         SweepManifest
//	DIR/objects.json       the Services, EndpointSlices, Nodes, kube-proxy pods and ConfigMaps
//	DIR/nodes/NODE/        a bundle (bundle.json and its files)
const (
	SweepManifestFile = "sweep.json"
	SweepObjectsFile  = "objects.json"
	sweepNodesDir     = "nodes"
	// maxSweepManifestBytes bounds sweep.json: some 100 bytes a node.
	maxSweepManifestBytes = 16 << 20
)

// SweepManifest says what a sweep folder holds.
type SweepManifest struct {
	APIVersion  string      `json:"apiVersion"`
	Kind        string      `json:"kind"`
	CollectedAt time.Time   `json:"collectedAt"`
	Objects     string      `json:"objects"`
	Nodes       []SweepNode `json:"nodes"`
}

// SweepNode is one node of a sweep folder: its bundle, or why there is
// none.
type SweepNode struct {
	Name string `json:"name"`
	// Dir is the bundle's folder, relative to the sweep folder.
	Dir    string `json:"dir,omitempty"`
	Error  string `json:"error,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// IsSweepDir says whether dir is a sweep folder.
func IsSweepDir(dir string) bool {
	st, err := os.Stat(filepath.Join(dir, SweepManifestFile))
	return err == nil && st.Mode().IsRegular()
}

// NodeBundleDir is where a sweep folder keeps node's bundle.
func NodeBundleDir(sweepDir, node string) string {
	return filepath.Join(sweepDir, sweepNodesDir, node)
}

// ReadSweepManifest reads DIR/sweep.json, checking that every node's
// folder is one of DIR/nodes/*, and that the manifest, the objects and the
// nodes' folders are what collect wrote: regular files and folders, never
// a link (which would read a bundle from anywhere), a FIFO (which blocks
// the read for as long as no one writes) or a device.
func ReadSweepManifest(dir string) (*SweepManifest, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := openSweepFile(root, dir, SweepManifestFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxSweepManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxSweepManifestBytes {
		return nil, fmt.Errorf("%s/%s: larger than %s: not written by collect", dir, SweepManifestFile, HumanBytes(maxSweepManifestBytes))
	}
	var m SweepManifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s/%s: %w", dir, SweepManifestFile, err)
	}
	if m.Kind != "Sweep" {
		return nil, fmt.Errorf("%s/%s: kind %q, not Sweep", dir, SweepManifestFile, m.Kind)
	}
	if m.Objects != "" && m.Objects != SweepObjectsFile {
		return nil, fmt.Errorf("%s/%s: objects %q: a sweep keeps them in %s", dir, SweepManifestFile, m.Objects, SweepObjectsFile)
	}
	for _, n := range m.Nodes {
		if n.Dir != "" {
			if want := sweepNodesDir + "/" + n.Name; n.Dir != want || !validBundlePath(n.Dir) || strings.Contains(n.Name, "/") {
				return nil, fmt.Errorf("%s/%s: node %q is in %q, not %s", dir, SweepManifestFile, n.Name, n.Dir, want)
			}
			if err := checkSweepEntry(root, dir, n.Dir, fs.ModeDir); err != nil {
				return nil, err
			}
		}
		// Every node, read or not: its name is a folder name and a line
		// of the sweep's output either way.
		if err := CheckNodeName(n.Name); err != nil {
			return nil, fmt.Errorf("%s/%s: %w", dir, SweepManifestFile, err)
		}
	}
	if err := checkSweepEntry(root, dir, SweepObjectsFile, 0); err != nil {
		return nil, err
	}
	return &m, nil
}

// checkSweepEntry refuses name in the sweep folder if it is there and is
// not of type typ (0: a regular file; fs.ModeDir: a folder), its parent
// folders included. A missing one is left to the read that needs it.
func checkSweepEntry(root *os.Root, dir, name string, typ fs.FileMode) error {
	if parent := path.Dir(name); parent != "." {
		if err := checkSweepEntry(root, dir, parent, fs.ModeDir); err != nil {
			return err
		}
	}
	st, err := root.Lstat(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sweep folder %s: %w", dir, err)
	}
	if got := st.Mode().Type(); got != typ {
		return fmt.Errorf("sweep folder %s: %s is %s, not %s as collect writes it: refusing to read it", dir, name, fileTypeName(got), fileTypeName(typ))
	}
	return nil
}

// openSweepFile opens a regular file of the sweep folder; O_NONBLOCK: a
// FIFO swapped in after the check does not block the open.
func openSweepFile(root *os.Root, dir, name string) (*os.File, error) {
	if err := checkSweepEntry(root, dir, name, 0); err != nil {
		return nil, err
	}
	f, err := root.OpenFile(name, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, fmt.Errorf("sweep folder %s: %w", dir, err)
	}
	if st, err := f.Stat(); err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("sweep folder %s: %s is not a regular file: refusing to read it", dir, name)
	}
	return f, nil
}

// fileTypeName names a file type for an error.
func fileTypeName(t fs.FileMode) string {
	switch {
	case t == 0:
		return "a regular file"
	case t&fs.ModeDir != 0:
		return "a folder"
	case t&fs.ModeSymlink != 0:
		return "a symbolic link"
	case t&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case t&fs.ModeSocket != 0:
		return "a socket"
	case t&fs.ModeDevice != 0:
		return "a device"
	}
	return "of type " + t.String()
}

// SweepWriter writes a sweep folder: the nodes' bundles as they are
// collected, then the manifest.
type SweepWriter struct {
	Dir string
	man SweepManifest
}

// NewSweepWriter makes the folder (which must not exist, or be empty).
func NewSweepWriter(dir string, at time.Time) (*SweepWriter, error) {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return nil, fmt.Errorf("%s exists and is not empty: choose a new folder", dir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Join(dir, sweepNodesDir), dirMode); err != nil {
		return nil, err
	}
	return &SweepWriter{Dir: dir, man: SweepManifest{APIVersion: BundleAPIVersion, Kind: "Sweep", CollectedAt: at.UTC().Truncate(time.Second), Objects: SweepObjectsFile}}, nil
}

// NodeDir is the folder to collect node's bundle into.
func (w *SweepWriter) NodeDir(node string) string { return NodeBundleDir(w.Dir, node) }

// Objects writes the objects file.
func (w *SweepWriter) Objects(data []byte) error {
	return writePrivate(filepath.Join(w.Dir, SweepObjectsFile), data)
}

// Node records a node: collected, or why not.
func (w *SweepWriter) Node(name string, err error, reason string) {
	n := SweepNode{Name: name}
	if err != nil {
		n.Error, n.Reason = err.Error(), reason
	} else {
		n.Dir = sweepNodesDir + "/" + name
	}
	w.man.Nodes = append(w.man.Nodes, n)
}

// Close writes the manifest.
func (w *SweepWriter) Close() error {
	data, err := json.MarshalIndent(&w.man, "", "  ")
	if err != nil {
		return err
	}
	return writePrivate(filepath.Join(w.Dir, SweepManifestFile), append(data, '\n'))
}

func writePrivate(path string, data []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fileMode)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
