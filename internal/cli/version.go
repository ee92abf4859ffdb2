package cli

import (
	"flag"
	"fmt"
	"io"
	"runtime/debug"
	"strings"
)

// Commit is the VCS commit the build was made from, set at link time
// (-ldflags "-X github.com/inferbid/inferbid/internal/cli.Commit=REV", as
// make and scripts/demo.sh do) for builds go did not stamp: GOFLAGS with
// -buildvcs=false, a git worktree. VCS information go stamped wins.
var Commit string

// VersionFlag defines --version on fs. When it is set after parsing, the
// command prints Version(name) to stdout and exits 0 before checking
// anything else (a missing required flag must not hide the version).
func VersionFlag(fs *flag.FlagSet) *bool {
	return fs.Bool("version", false, "print the version (module version and VCS commit) and exit")
}

// PrintVersion writes Version(name) and a newline to w.
func PrintVersion(w io.Writer, name string) {
	fmt.Fprintln(w, Version(name))
}

// Version is "NAME VERSION (commit C[, modified][, TIME]) GO" for this
// binary, from runtime/debug.ReadBuildInfo: the module version ("devel"
// for a build from a checkout) and the VCS commit go build stamped in.
func Version(name string) string {
	bi, ok := debug.ReadBuildInfo()
	return formatVersion(name, bi, ok)
}

func formatVersion(name string, bi *debug.BuildInfo, ok bool) string {
	if !ok || bi == nil {
		return name + " unknown version (no build information in the binary)"
	}
	version := bi.Main.Version
	switch version {
	case "", "(devel)":
		// Built from a checkout (go build, not go install m@v).
		version = "devel"
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	var vcs []string
	if rev := settings["vcs.revision"]; rev != "" {
		vcs = append(vcs, "commit "+rev)
		if settings["vcs.modified"] == "true" {
			vcs = append(vcs, "modified")
		}
		if t := settings["vcs.time"]; t != "" {
			vcs = append(vcs, t)
		}
	} else if Commit != "" {
		vcs = append(vcs, "commit "+Commit)
	} else {
		// go test binaries, -buildvcs=false, or a build outside a checkout.
		vcs = append(vcs, "commit unknown: built without VCS information")
	}
	out := name + " " + version + " (" + strings.Join(vcs, ", ") + ")"
	if bi.GoVersion != "" {
		out += " " + bi.GoVersion
	}
	return out
}
