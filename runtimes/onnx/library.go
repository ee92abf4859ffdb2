package onnx

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// LibraryEnv names the environment variable that points at the ONNX Runtime
// shared library when driver.Config.LibraryPath is empty.
const LibraryEnv = "INFERBID_ONNXRUNTIME_LIB"

// LibraryName is the file name of the ONNX Runtime shared library that
// scripts/install-onnxruntime.sh installs (the only name the npm package has).
const LibraryName = "libonnxruntime.so.1"

// libraryDir is where the install script puts the library, relative to the
// repository root (and to the parent of bin/ for built binaries).
var libraryDir = filepath.Join("lib", "onnxruntime")

const installHint = "run `make build` or scripts/install-onnxruntime.sh to install it, " +
	"or point runtime config library_path or $" + LibraryEnv + " at a libonnxruntime.so"

// FindLibrary returns the path of the ONNX Runtime shared library: configured
// (driver.Config.LibraryPath) if set, else $INFERBID_ONNXRUNTIME_LIB if set,
// else the first that exists of <dir of the executable>/../lib/onnxruntime/
// and <module root above the working directory>/lib/onnxruntime/. An explicit
// path is never silently replaced by a default. The error is a typed
// MODEL_EXECUTION error naming every path tried and how to fix it.
func FindLibrary(configured string) (string, error) {
	var tried []string
	check := func(p string) (string, bool) {
		tried = append(tried, p)
		st, err := os.Stat(p)
		return p, err == nil && !st.IsDir()
	}
	explicit := func(p, from string) (string, error) {
		if abs, err := filepath.Abs(p); err == nil {
			p = abs
		}
		if p, ok := check(p); ok {
			return p, nil
		}
		return "", fmt.Errorf("onnx: ONNX Runtime library %s from %s not found; %s", p, from, installHint)
	}
	if configured != "" {
		return explicit(configured, "runtime config library_path")
	}
	if env := os.Getenv(LibraryEnv); env != "" {
		return explicit(env, "$"+LibraryEnv)
	}
	for _, p := range defaultLibraryPaths() {
		if p, ok := check(p); ok {
			return p, nil
		}
	}
	if len(tried) == 0 {
		return "", fmt.Errorf("onnx: ONNX Runtime library %s not found (no executable directory or go.mod to look in); %s", LibraryName, installHint)
	}
	return "", fmt.Errorf("onnx: ONNX Runtime library not found (tried %s); %s", strings.Join(tried, ", "), installHint)
}

// defaultLibraryPaths lists the default locations, most specific first.
func defaultLibraryPaths() []string {
	var paths []string
	if exe, err := os.Executable(); err == nil {
		if real, err := filepath.EvalSymlinks(exe); err == nil {
			exe = real
		}
		paths = append(paths, filepath.Join(filepath.Dir(exe), "..", libraryDir, LibraryName))
	}
	if root, err := moduleRoot(); err == nil {
		p := filepath.Join(root, libraryDir, LibraryName)
		if len(paths) == 0 || filepath.Clean(paths[0]) != p {
			paths = append(paths, p)
		}
	}
	for i, p := range paths {
		paths[i] = filepath.Clean(p)
	}
	return paths
}

// moduleRoot walks up from the working directory to the first folder holding
// go.mod (tests run in the package folder; `go run` and developers in the repo).
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", err
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory")
		}
		dir = parent
	}
}
