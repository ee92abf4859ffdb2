package sidecar

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// checkSocketDir refuses a socket directory that another user owns or that
// others may write to: whoever can write there can replace the socket with
// their own, and the host would send its requests and models to them.
func checkSocketDir(dir string) error {
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("sidecar: socket directory %q: %w", dir, err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("sidecar: socket directory %q is not a directory", dir)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return fmt.Errorf("sidecar: socket directory %q: cannot read its owner", dir)
	}
	if uid := os.Geteuid(); int(st.Uid) != uid {
		return fmt.Errorf("sidecar: socket directory %q is owned by uid %d (mode %v), not by this user (uid %d): another user could replace the socket; use a directory of your own", dir, st.Uid, fi.Mode().Perm(), uid)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("sidecar: socket directory %q has mode %v: writable by group or others, who could replace the socket; use a directory of mode 0700 (or at least not group/world-writable)", dir, perm)
	}
	return nil
}

// privateDirPrefix names the supervisor's private temporary directories.
const privateDirPrefix = "inferbid-sidecar-"

// ownerFile, in a private directory, records the process that owns it
// ("pid start-time pid-namespace"), so that a later host can remove the
// directory of a host that was killed before it could.
const ownerFile = "owner"

// makePrivateDir creates the supervisor's private directory in parent
// ("" = os.TempDir()) and records this process as its owner.
func makePrivateDir(parent string) (string, error) {
	dir, err := os.MkdirTemp(parent, privateDirPrefix)
	if err != nil {
		return "", err
	}
	pid := os.Getpid()
	stamp := strconv.Itoa(pid) + " " + procStartTime(pid) + " " + pidNamespace() + "\n"
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(stamp), 0o600); err != nil {
		os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// removeStalePrivateDirs removes the private directories in parent ("" =
// os.TempDir()) that this user owns and whose recorded owner process is
// gone. Directories it cannot judge (no owner record, another user's) are
// left alone.
func removeStalePrivateDirs(parent string, log *slog.Logger) {
	if parent == "" {
		parent = os.TempDir()
	}
	entries, err := os.ReadDir(parent)
	if err != nil {
		log.Warn("cannot look for stale sidecar directories", "dir", parent, "err", err)
		return
	}
	uid := os.Geteuid()
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), privateDirPrefix) {
			continue // e.IsDir is false for symlinks: never followed
		}
		dir := filepath.Join(parent, e.Name())
		fi, err := os.Lstat(dir)
		if err != nil {
			continue
		}
		if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != uid {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		if ownerAlive(string(b)) {
			continue
		}
		if err := os.RemoveAll(dir); err != nil {
			log.Warn("cannot remove a stale sidecar directory", "dir", dir, "err", err)
			continue
		}
		log.Info("removed the directory of a host that is gone", "dir", dir, "owner", strings.TrimSpace(string(b)))
	}
}

// ownerAlive reports whether the process recorded as "pid start-time
// pid-namespace" still runs (the same process: a reused pid has another
// start time). A record it cannot read, or made in another pid namespace
// (a container sharing the temp dir, whose pids mean nothing here), counts
// as alive.
func ownerAlive(record string) bool {
	f := strings.Fields(record)
	if len(f) < 1 || len(f) >= 3 && f[2] != pidNamespace() {
		return true
	}
	pid, err := strconv.Atoi(f[0])
	if err != nil || pid <= 0 {
		return true
	}
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return false
	}
	if len(f) >= 2 && f[1] != "" {
		if now := procStartTime(pid); now != "" && now != f[1] {
			return false
		}
	}
	return true
}

// pidNamespace identifies this process's pid namespace ("pid:[4026531836]"),
// "?" when unknown.
func pidNamespace() string {
	ns, err := os.Readlink("/proc/self/ns/pid")
	if err != nil || ns == "" || strings.ContainsAny(ns, " \t\n") {
		return "?"
	}
	return ns
}

// procStartTime is a process's start time in clock ticks since boot
// (/proc/PID/stat field 22), "" when unknown.
func procStartTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return ""
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); field 22 is f[19].
	if len(f) < 20 {
		return ""
	}
	return f[19]
}
